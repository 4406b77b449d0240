// The service is configured with a RegistryConfiguration and builds its
// tenants from a TenantStorage: every user of this module needs them, and
// they were declared here until 0.3.0. Re-exported so that
// `import GRDBRegistryService` alone still compiles an application (and
// every file of this module sees them without its own import).
@_exported import GRDBRegistryConfiguration
