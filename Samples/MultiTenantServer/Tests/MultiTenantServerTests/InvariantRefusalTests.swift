import GRDBRegistryExamples
@testable import MultiTenantServer
import Testing

@Suite struct InvariantRefusalTests {
    /// Every invariant of a tenant's database has its sentence: none shows
    /// people the generic one, or its name.
    @Test func everyPlayerInvariantHasASentenceForPeople() {
        let names = PlayerRepository.invariants.map(\.name)
        #expect(!names.isEmpty)
        for name in names {
            #expect(InvariantRefusal.sentences[name] != nil, "no sentence for the invariant \(name)")
        }
        #expect(Set(InvariantRefusal.sentences.keys) == Set(names), "a sentence for an invariant that no longer exists")
    }
}
