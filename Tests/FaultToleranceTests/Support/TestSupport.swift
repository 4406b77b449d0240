/// Every test target shares one support module (temporary directories,
/// child processes, oracles, polling); re-exported here so that each test
/// file sees it without importing it.
@_exported import TestSupport
