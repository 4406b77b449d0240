import Foundation
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
@testable import GRDBRegistryService
import Testing

/// The service fits the tenant directory's maxOpen to the limit of open
/// files (issue 26): each open tenant holds about 5 descriptors, and a
/// directory allowed more than the limit leaves fails late, with "unable to
/// open database file". The end-to-end check (600 tenants under `ulimit -n
/// 1024`) is the sample's FileDescriptorBudgetTests.
@Suite struct FileDescriptorBudgetTests {
    /// The soft limit goes up to the hard one (what any process may do).
    @Test func theSoftLimitIsRaisedToTheHardOne() {
        FileDescriptorBudget.raiseSoftLimit()
        let (soft, hard) = FileDescriptorBudget.limits()
        #expect(soft == min(hard, 1 << 20))
        #expect(FileDescriptorBudget.openDescriptorCount().map { $0 > 0 && $0 < soft } == true)
    }

    /// A reserve that leaves room for ~40 tenants lowers maxOpen from 256,
    /// says so in the log, and reports the budget in health().
    @Test func maxOpenFitsWhatTheLimitLeaves() throws {
        let directory = try TemporaryDirectory()
        FileDescriptorBudget.raiseSoftLimit()
        let soft = FileDescriptorBudget.limits().soft
        let inUse = try #require(FileDescriptorBudget.openDescriptorCount())
        let logs = LogRecorder()
        let service = DatabaseService(
            configuration: RegistryConfiguration(databases: [], tenants: .init(root: directory.path("tenants"), maxOpen: 256)),
            environment: [:], logger: logs.logger(),
            reservedFileDescriptors: soft - inUse - 40 * FileDescriptorBudget.descriptorsPerTenant)
        let tenants = try service.tenants(of: PlayerRepository.self)
        // Other tests open and close files meanwhile: about 40.
        #expect(tenants.maxOpen >= 20 && tenants.maxOpen <= 60, "\(tenants.maxOpen)")
        let budget = try #require(service.health().tenants?.fileDescriptors)
        #expect(budget.maxOpen == tenants.maxOpen && budget.configuredMaxOpen == 256 && budget.isCapped)
        #expect(budget.softLimit == soft)
        #expect(service.health().description.contains("lowered to fit the limit"))
        #expect(logs.all.contains { $0.message.contains("tenants.maxOpen lowered") && ($0.metadata["budget"] ?? "").contains("maxOpen \(tenants.maxOpen)") })
    }

    /// A limit that leaves no room for tenants is refused when the
    /// directory is made, naming the limit and the fix.
    @Test func aLimitWithNoRoomForTenantsIsRefused() throws {
        let directory = try TemporaryDirectory()
        FileDescriptorBudget.raiseSoftLimit()
        let service = DatabaseService(
            configuration: RegistryConfiguration(databases: [], tenants: .init(root: directory.path("tenants"), maxOpen: 256)),
            environment: [:], logger: LogRecorder().logger(),
            reservedFileDescriptors: FileDescriptorBudget.limits().soft)
        let error = #expect(throws: DatabaseServiceError.self) { try service.tenants(of: PlayerRepository.self) }
        guard case let .fileDescriptorLimitTooLow(budget)? = error else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(budget.maxOpen == 0)
        #expect(error?.description.contains("ulimit -n") == true)
    }

    /// Tenants are one metric series, never one per tenant id.
    @Test func metricLabelsNameNoTenant() {
        #expect(ServiceMetrics.label(of: "tenants/acme") == "tenants")
        #expect(ServiceMetrics.label(of: "catalog") == "catalog")
    }
}
