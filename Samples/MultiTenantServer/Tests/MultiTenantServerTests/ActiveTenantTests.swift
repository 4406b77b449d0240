import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
@testable import MultiTenantServer
import Testing

/// A tenant of the server is the directory's repository: its reads see
/// every write that returned, with no bookkeeping by the caller, and its
/// leaderboard is served from memory while nothing commits.
@Suite struct ActiveTenantTests {
    @Test func aLeaderboardHasEveryWriteThatReturned() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = try ServerTenants(root: root)
        let acme = try TenantID("acme")
        try directory.provision(acme)
        let tenant = try await directory.lease(acme).repository
        for index in 0..<20 {
            let player = try await tenant.add(name: "P\(index)", score: index, team: nil, maximumPlayers: 1_000)
            let board = try await tenant.leaderboard()
            #expect(board.players.contains(player), "write \(index) not read back")
        }
        // Nothing committed since: the same leaderboard, from memory.
        let first = try await tenant.leaderboard()
        #expect(try await tenant.leaderboard().encoded === first.encoded)
        // A write made through the players repository directly counts too:
        // the database counts commits, not the routes.
        try await tenant.players.updateScore(of: try #require(first.players.last?.id), to: 10_000)
        #expect(try await tenant.leaderboard().players.first?.score == 10_000)
        await directory.close(drainTimeout: .seconds(5))
    }

    @Test func theQuotaOfPlayersIsExact() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = try ServerTenants(root: root)
        let acme = try TenantID("acme")
        try directory.provision(acme)
        let tenant = try await directory.lease(acme).repository
        for index in 0..<3 {
            _ = try await tenant.add(name: "P\(index)", score: 0, team: nil, maximumPlayers: 3)
        }
        await #expect(throws: (any Error).self) {
            try await tenant.add(name: "P3", score: 0, team: nil, maximumPlayers: 3)
        }
        #expect(try await tenant.players.reader.read { db in try Player.fetchCount(db) } == 3)
        let first = try #require(try await tenant.leaderboard().players.first?.id)
        #expect(try await tenant.delete(first))
        _ = try await tenant.add(name: "P4", score: 0, team: nil, maximumPlayers: 3)
        await directory.close(drainTimeout: .seconds(5))
    }
}
