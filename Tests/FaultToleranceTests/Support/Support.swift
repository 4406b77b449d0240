/// Every test target shares one support module (temporary directories,
/// child processes, registryctl's path); re-exported here so that each
/// test file sees it without importing it.
///
/// TestSupport's temporary directories are canonical paths (symlinks
/// resolved), as the fault VFS needs: it matches files by the path SQLite
/// opens them with.
@_exported import TestSupport
