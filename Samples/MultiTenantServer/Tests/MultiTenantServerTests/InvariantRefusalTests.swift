import GRDBRegistryExamples
@testable import MultiTenantServer
import Testing

@Suite struct InvariantRefusalTests {
    /// Every invariant of a tenant's database explains itself: none shows
    /// people the generic sentence, or its name.
    @Test func everyPlayerInvariantHasASentenceForPeople() {
        #expect(!PlayerRepository.invariants.isEmpty)
        for invariant in PlayerRepository.invariants {
            let sentence = invariant.explanation ?? ""
            #expect(!sentence.isEmpty, "no sentence for the invariant \(invariant.name)")
            #expect(!sentence.contains(invariant.name), "\(invariant.name)'s sentence shows its name: \(sentence)")
        }
    }
}
