import Foundation
import GRDBReplicaStore
@testable import GRDBRegistryService
import Testing
import TestSupport

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

    /// A restore to a point in time may need any file: every LTX file of
    /// the replica is staged, and nothing else.
    @Test func aPointInTimeRestoreStagesEveryLTXFile() {
        let files = [Self.ltx(9, 1, 40), Self.ltx(9, 1, 90), Self.ltx(1, 10, 20), Self.ltx(0, 121, 121)]
        let objects = files.map(Self.object) + [ReplicaObject(key: Self.key + "/encrypted.sqlite", size: 10)]
        let needed = StagedReplica.neededFiles(under: Self.key, in: objects, at: Date(timeIntervalSince1970: 1_800_000_000))
        #expect(needed.map(\.relativePath) == files.sorted())
    }

    /// A staged file's modification time is the time its LTX header
    /// records, as in Litestream's own folder replicas, where a
    /// point-in-time restore reads it; a file with no LTX header is
    /// refused.
    @Test func aStagedFileTakesTheTimeOfItsLTXHeader() throws {
        let directory = try TemporaryDirectory()
        let milliseconds: Int64 = 1_795_000_123_456
        var header = Data("LTX1".utf8) + Data(count: 28)
        header += withUnsafeBytes(of: UInt64(milliseconds).bigEndian) { Data($0) }
        header += Data(count: StagedReplica.headerSize - header.count + 16)
        #expect(StagedReplica.headerTimestamp(header) == milliseconds)
        let path = directory.path("0000000000000001-0000000000000001.ltx")
        #expect(FileManager.default.createFile(atPath: path, contents: header))
        try StagedReplica.setTimeFromHeader(ofLTXFileAt: path, key: "k", database: "tenants/acme")
        let modified = try #require(try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date)
        #expect(abs(modified.timeIntervalSince1970 - Double(milliseconds) / 1000) < 0.000_01)

        for damaged in [Data("LTX1".utf8), Data("LTX2".utf8) + header.dropFirst(4)] {
            #expect(StagedReplica.headerTimestamp(damaged) == nil)
            #expect(FileManager.default.createFile(atPath: path, contents: damaged))
            #expect(throws: ReplicationError.restoreFailed(database: "tenants/acme", reason: "k is not an LTX file: its header is missing or damaged")) {
                try StagedReplica.setTimeFromHeader(ofLTXFileAt: path, key: "k", database: "tenants/acme")
            }
        }
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

    @Test func aStageLeftByADeadProcessIsSweptAndOthersAreKept() throws {
        let directory = try TemporaryDirectory()
        // A process that has exited: its id now names no process.
        let exited = Process()
        exited.executableURL = URL(fileURLWithPath: "/bin/true")
        try exited.run()
        exited.waitUntilExit()
        let dead = exited.processIdentifier
        let swept = [
            ".replica-stage-\(dead)-0b1c",                       // its owner died mid-restore
            ".replica-stage-c0ffee00-1111-2222-3333-444455556666", // the first version's name
        ]
        let kept = [
            ".replica-stage-\(getpid())-5d6e",                   // a restore of this process
            ".replica-stage-1-7f80",                              // a live process's
            "acme",                                               // a tenant's folder
            "acme.sqlite",
        ]
        for name in swept + kept.dropLast() {
            try FileManager.default.createDirectory(atPath: directory.path(name), withIntermediateDirectories: false)
            #expect(FileManager.default.createFile(atPath: directory.path(name + "/piece"), contents: Data("x".utf8)))
        }
        #expect(FileManager.default.createFile(atPath: directory.path("acme.sqlite"), contents: Data("x".utf8)))
        StagedReplica.sweepAbandoned(in: directory.path)
        let left = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
        #expect(left == Set(kept))
    }
}
