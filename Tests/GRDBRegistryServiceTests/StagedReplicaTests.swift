import Foundation
import GRDBReplicaStore
@testable import GRDBRegistryService
import Testing

/// What a restore from a bucket fetches before Litestream reads it as a
/// folder: the newest snapshot and what ends past it, nothing else.
@Suite struct StagedReplicaTests {
    static let key = "tenants/acme/epoch-00000000000000000003"

    static func object(_ relative: String) -> ReplicaObject {
        ReplicaObject(key: key + "/" + relative, size: 100)
    }

    static func ltx(_ level: Int, _ min: UInt64, _ max: UInt64) -> String {
        func hex(_ value: UInt64) -> String {
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }
        return "\(StagedReplica.levelName(level))/\(hex(min))-\(hex(max)).ltx"
    }

    @Test func theNewestSnapshotAndTheFilesEndingPastItAreFetched() {
        let objects = [
            Self.ltx(9, 1, 40), Self.ltx(9, 1, 90),       // two snapshots: the newer one
            Self.ltx(2, 1, 60), Self.ltx(2, 61, 120),     // the second ends past it
            Self.ltx(1, 85, 95),                          // straddles the snapshot
            Self.ltx(1, 10, 20),                          // before it: not needed
            Self.ltx(0, 121, 121), Self.ltx(0, 122, 122),
        ].map(Self.object) + [
            // Not LTX files of this replica.
            ReplicaObject(key: Self.key + "/encrypted.sqlite", size: 10),
            ReplicaObject(key: Self.key + "/generations/x/snapshots/0.snapshot.lz4", size: 10),
            ReplicaObject(key: "tenants/acme/epoch-00000000000000000002/0000/0000000000000001-0000000000000001.ltx", size: 10),
            ReplicaObject(key: Self.key + "/0000/zz-0000000000000001.ltx", size: 10),
            ReplicaObject(key: Self.key + "/0000/0000000000000002-0000000000000001.ltx", size: 10),
        ]
        let needed = StagedReplica.neededFiles(under: Self.key, in: objects).map(\.relativePath)
        #expect(needed == [Self.ltx(0, 121, 121), Self.ltx(0, 122, 122), Self.ltx(1, 85, 95), Self.ltx(2, 61, 120), Self.ltx(9, 1, 90)])
    }

    @Test func withoutASnapshotEveryLTXFileIsFetched() {
        let files = [Self.ltx(1, 1, 6), Self.ltx(0, 7, 7), Self.ltx(0, 1, 1)]
        let needed = StagedReplica.neededFiles(under: Self.key, in: files.map(Self.object)).map(\.relativePath)
        #expect(needed == files.sorted())
        #expect(StagedReplica.neededFiles(under: Self.key, in: []).isEmpty)
    }

    @Test func anLTXNameIsParsedStrictly() throws {
        let file = try #require(StagedReplica.ltxFile(Self.key + "/0001/0000000000000001-00000000000000ff.ltx", under: Self.key))
        #expect(file.level == 1 && file.minTXID == 1 && file.maxTXID == 255 && file.relativePath == "0001/0000000000000001-00000000000000ff.ltx")
        // Where a file:// replica of Litestream keeps it.
        #expect(file.stagedPath == "ltx/1/0000000000000001-00000000000000ff.ltx")
        for name in ["1/0000000000000001-0000000000000001.ltx", "0001/0000000000000001-0000000000000001.ltx.tmp",
                     "0001/x/0000000000000001-0000000000000001.ltx", "0001/000000000000001-0000000000000001.ltx"] {
            #expect(StagedReplica.ltxFile(Self.key + "/" + name, under: Self.key) == nil, "\(name)")
        }
        #expect(StagedReplica.ltxFile(Self.key + "x/0001/0000000000000001-0000000000000001.ltx", under: Self.key) == nil)
    }
}
