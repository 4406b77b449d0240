import Foundation
import Testing
@testable import GRDBRegistryService

/// What an answer of Litestream's control socket to `sync` proves.
struct LitestreamSyncResultTests {
    static func result(_ json: String) throws -> LitestreamReplicator.SyncResult {
        try JSONDecoder().decode(LitestreamReplicator.SyncResult.self, from: Data(json.utf8))
    }

    @Test func aFinishedUploadIsOneWhoseReplicaCaughtUp() throws {
        #expect(try Self.result(#"{"status":"synced","path":"/t.sqlite","txid":12,"replicated_txid":12}"#).isFinishedUpload)
        #expect(try Self.result(#"{"status":"no_change","path":"/t.sqlite","txid":12,"replicated_txid":12}"#).isFinishedUpload)
    }

    @Test func aCommitTakenDuringTheUploadDoesNotMakeItUnfinished() throws {
        // Litestream reads `txid` after the upload: a concurrent writer's
        // commit, taken by its WAL monitor meanwhile, is counted there
        // and not yet in the replica. Every commit before the call is.
        #expect(try Self.result(#"{"status":"synced","path":"/t.sqlite","txid":204,"replicated_txid":203}"#).isFinishedUpload)
    }

    @Test func aLocalSyncOrAnEmptyReplicaIsNoFinishedUpload() throws {
        #expect(try !Self.result(#"{"status":"synced_local","path":"/t.sqlite","txid":12,"replicated_txid":12}"#).isFinishedUpload)
        #expect(try !Self.result(#"{"status":"synced","path":"/t.sqlite","txid":12,"replicated_txid":0}"#).isFinishedUpload)
        #expect(try !Self.result(#"{"status":"what","path":"/t.sqlite","txid":12,"replicated_txid":12}"#).isFinishedUpload)
    }
}
