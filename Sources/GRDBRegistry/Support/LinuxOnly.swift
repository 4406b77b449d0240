// GRDBRegistry runs on Linux only: the encryption VFS is built on OpenSSL's
// libcrypto, and the replicator and the file-descriptor budget read /proc.
// Elsewhere the build stops here, with a message instead of a missing header.
#if !os(Linux)
#error("GRDBRegistry supports Linux only (see README.md, \"Installing\").")
#endif
