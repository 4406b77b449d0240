import Foundation
import GRDBReplicaStore
import Testing
import TestSupport

@Suite struct FolderReplicaStoreBackendTests {
    @Test func putObjectsAreReadBackListedSortedAndDeleted() async throws {
        let directory = try TemporaryDirectory()
        let backend: any ReplicaStoreBackend = FolderReplicaStoreBackend(root: directory.path("store"))
        try await backend.put("tenants/bravo/a", data: Data("bravo".utf8))
        try await backend.put("tenants/acme/epoch-00000000000000000001/encrypted.sqlite", data: Data(repeating: 7, count: 100_000))
        try await backend.put("databases/catalog/x", data: Data())
        #expect(try await backend.get("tenants/bravo/a") == Data("bravo".utf8))
        #expect(try await backend.list(prefix: "tenants/") == [
            ReplicaObject(key: "tenants/acme/epoch-00000000000000000001/encrypted.sqlite", size: 100_000),
            ReplicaObject(key: "tenants/bravo/a", size: 5),
        ])
        #expect(try await backend.list(prefix: "tenants/b").map(\.key) == ["tenants/bravo/a"])
        #expect(try await backend.list(prefix: "").map(\.key) == [
            "databases/catalog/x", "tenants/acme/epoch-00000000000000000001/encrypted.sqlite", "tenants/bravo/a",
        ])
        // The file is where the existing layout has it.
        #expect(FileManager.default.contents(atPath: directory.path("store/tenants/bravo/a")) == Data("bravo".utf8))

        try await backend.delete("tenants/bravo/a")
        try await backend.delete("tenants/bravo/a")
        #expect(try await backend.list(prefix: "tenants/bravo/").isEmpty)
        await #expect(throws: ReplicaStoreError.notFound(key: "tenants/bravo/a")) { try await backend.get("tenants/bravo/a") }
    }

    @Test func aMissingPrefixListsNothing() async throws {
        let directory = try TemporaryDirectory()
        let backend = FolderReplicaStoreBackend(root: directory.path("never-created"))
        #expect(try backend.list(prefix: "tenants/").isEmpty)
        #expect(try backend.list(prefix: "").isEmpty)
        #expect(!FileManager.default.fileExists(atPath: directory.path("never-created")))
    }

    @Test func filesAreCopiedInAndOutWhole() async throws {
        let directory = try TemporaryDirectory()
        let backend = FolderReplicaStoreBackend(root: directory.path("store"))
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try bytes.write(to: directory.url("source.sqlite"))
        try backend.put("tenants/acme/encrypted.sqlite", fromFile: directory.path("source.sqlite"))
        try backend.get("tenants/acme/encrypted.sqlite", toFile: directory.path("restored.sqlite"))
        #expect(FileManager.default.contents(atPath: directory.path("restored.sqlite")) == bytes)
        // A source that can't be read publishes nothing.
        #expect(throws: ReplicaStoreError.self) { try backend.put("tenants/acme/other", fromFile: directory.path("missing")) }
        #expect(try backend.list(prefix: "tenants/acme/").map(\.key) == ["tenants/acme/encrypted.sqlite"])
    }

    @Test func whatAnInterruptedPutLeavesIsNeverAnObject() async throws {
        let directory = try TemporaryDirectory()
        let backend = FolderReplicaStoreBackend(root: directory.path("store"))
        try backend.put("tenants/acme/snapshot", data: Data("old".utf8))
        // A put killed between its write and its rename leaves its
        // temporary file beside the object.
        let leftover = directory.path("store/tenants/acme/" + FolderReplicaStoreBackend.temporaryPrefix + "crashed-snapshot")
        try Data("half of the n".utf8).write(to: URL(fileURLWithPath: leftover))
        #expect(try backend.list(prefix: "tenants/").map(\.key) == ["tenants/acme/snapshot"])
        #expect(try backend.get("tenants/acme/snapshot") == Data("old".utf8))
        // A put's own temporary file is gone once it is published.
        try backend.put("tenants/acme/snapshot", data: Data("new".utf8))
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path("store/tenants/acme")).sorted()
        #expect(names == [FolderReplicaStoreBackend.temporaryPrefix + "crashed-snapshot", "snapshot"])
    }

    @Test func aReaderSeesTheOldOrTheNewObjectNeverPartOfOne() async throws {
        let directory = try TemporaryDirectory()
        let backend = FolderReplicaStoreBackend(root: directory.path("store"))
        let old = Data(repeating: 0x41, count: 1 << 20)
        let new = Data(repeating: 0x42, count: 3 << 20)
        try backend.put("tenants/acme/snapshot", data: old)
        let writer = Task.detached {
            for round in 0..<40 {
                try backend.put("tenants/acme/snapshot", data: round.isMultiple(of: 2) ? new : old)
            }
        }
        for _ in 0..<200 {
            let data = try backend.get("tenants/acme/snapshot")
            #expect(data == old || data == new)
            #expect(try backend.list(prefix: "tenants/").map(\.key) == ["tenants/acme/snapshot"])
            await Task.yield()
        }
        try await writer.value
    }

    @Test(arguments: ["../outside", "tenants/../../outside", "/outside", "tenants/acme/../../../outside"])
    func keysLeavingTheRootAreRefusedAndTouchNothing(_ key: String) async throws {
        let directory = try TemporaryDirectory()
        let backend: any ReplicaStoreBackend = FolderReplicaStoreBackend(root: directory.path("store/root"))
        try Data("keep".utf8).write(to: directory.url("outside"))
        try Data("keep".utf8).write(to: URL(fileURLWithPath: try directory.subdirectory("store") + "/outside"))
        let before = try FileManager.default.subpathsOfDirectory(atPath: directory.path).sorted()

        func expectInvalidKey(_ operation: () async throws -> Void) async {
            await #expect {
                try await operation()
            } throws: { error in
                guard case .invalidKey = error as? ReplicaStoreError else { return false }
                return true
            }
        }
        await expectInvalidKey { try await backend.put(key, data: Data("escaped".utf8)) }
        await expectInvalidKey { try await backend.put(key, fromFile: directory.path("outside")) }
        await expectInvalidKey { _ = try await backend.get(key) }
        await expectInvalidKey { try await backend.get(key, toFile: directory.path("copy")) }
        await expectInvalidKey { try await backend.delete(key) }
        await expectInvalidKey { _ = try await backend.list(prefix: key) }

        #expect(try FileManager.default.subpathsOfDirectory(atPath: directory.path).sorted() == before)
        #expect(FileManager.default.contents(atPath: directory.path("outside")) == Data("keep".utf8))
        #expect(FileManager.default.contents(atPath: directory.path("store/outside")) == Data("keep".utf8))
    }

    @Test func aWholeFolderMovesWithOneRename() throws {
        let directory = try TemporaryDirectory()
        let backend = FolderReplicaStoreBackend(root: directory.path("store"))
        try backend.put("tenants/acme/a", data: Data("a".utf8))
        try backend.put("tenants/acme/b/c", data: Data("c".utf8))
        try backend.moveFolder("tenants/acme", to: "removed/tenants/acme/20260101T000000.000Z")
        #expect(try backend.list(prefix: "").map(\.key) == [
            "removed/tenants/acme/20260101T000000.000Z/a", "removed/tenants/acme/20260101T000000.000Z/b/c",
        ])
        #expect(throws: ReplicaStoreError.notFound(key: "tenants/acme")) {
            try backend.moveFolder("tenants/acme", to: "removed/tenants/acme/20260101T000001.000Z")
        }
    }

    @Test func aCopyIsAWholeNewFileAndKeepsTheSource() async throws {
        let directory = try TemporaryDirectory()
        let backend: any ReplicaStoreBackend = FolderReplicaStoreBackend(root: directory.path("store"))
        let bytes = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 3) })
        try await backend.put("tenants/acme/ltx/0/1.ltx", data: bytes)
        try await backend.copy("tenants/acme/ltx/0/1.ltx", to: "removed/tenants/acme/20270115T080000.250Z/ltx/0/1.ltx")
        #expect(try await backend.get("removed/tenants/acme/20270115T080000.250Z/ltx/0/1.ltx") == bytes)
        #expect(try await backend.get("tenants/acme/ltx/0/1.ltx") == bytes)
        // No temporary file is left beside the copy.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("store/removed/tenants/acme/20270115T080000.250Z/ltx/0")) == ["1.ltx"])
        await #expect(throws: ReplicaStoreError.notFound(key: "tenants/acme/missing")) {
            try await backend.copy("tenants/acme/missing", to: "removed/missing")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path("store/removed/missing")))
    }

}
