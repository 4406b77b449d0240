import GRDBReplicaStore
import Testing

@Suite struct ReplicaObjectTests {
    @Test func objectsCompareByKeyAndSize() {
        #expect(ReplicaObject(key: "a", size: 1) == ReplicaObject(key: "a", size: 1))
        #expect(ReplicaObject(key: "a", size: 1) != ReplicaObject(key: "a", size: 2))
    }
}
