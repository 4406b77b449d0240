import Foundation
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Hummingbird
import Logging
import Synchronization

/// The directory of team databases: one `PlayerRepository` per team.
typealias TeamDirectory = TenantDirectory<PlayerRepository>

/// What the routes share. The databases open after the HTTP server
/// starts: until they are ready, routes that need them answer 503.
final class ServerState: Sendable {
    /// What exists once the databases are open and migrated.
    struct Ready: Sendable {
        let databases: DatabaseService
        let catalog: CatalogView
        let teams: TeamDirectory
        let leaderboards: Leaderboards
    }

    let databases: DatabaseService
    let operatorToken: OperatorToken
    let logger: Logger
    /// Tenant creations, one at a time: a creation checks the catalog, the
    /// tenant file, then writes both.
    let creations = SerialQueue()
    private let ready = Mutex<Ready?>(nil)

    init(databases: DatabaseService, operatorToken: OperatorToken, logger: Logger) {
        self.databases = databases
        self.operatorToken = operatorToken
        self.logger = logger
    }

    /// Called once the databases are ready.
    func becomeReady() throws {
        let teams = try databases.tenants(of: PlayerRepository.self)
        let state = Ready(
            databases: databases,
            catalog: try CatalogView(databases: databases),
            teams: teams,
            // Live leaderboards hold their team open: keep half the
            // directory's cap for them, the rest for other requests.
            leaderboards: Leaderboards(capacity: teams.maxOpen / 2))
        ready.withLock { $0 = state }
    }

    var readyOrNil: Ready? { ready.withLock { $0 } }

    func requireReady() throws -> Ready {
        guard let ready = readyOrNil else {
            throw HTTPError(.serviceUnavailable, message: "The databases are not ready.")
        }
        return ready
    }
}

/// Runs async operations one after the other, in call order.
final class SerialQueue: Sendable {
    private let tail = Mutex<Task<Void, Never>?>(nil)

    func run<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let task = tail.withLock { tail in
            let previous = tail
            let task = Task { () -> Result<T, any Error> in
                await previous?.value
                do { return .success(try await operation()) } catch { return .failure(error) }
            }
            tail = Task { _ = await task.value }
            return task
        }
        return try await task.value.get()
    }
}
