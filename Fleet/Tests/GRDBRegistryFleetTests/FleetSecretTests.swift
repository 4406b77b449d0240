import Foundation
import GRDBRegistryFleet
import Testing

/// Forwarding proofs (security review 3, F1 and F4): only a holder of the
/// fleet secret makes one, for one request, for a short time.
@Suite("Fleet secret")
struct FleetSecretTests {
    static let request = ForwardedRequest(method: "GET", target: "/tenants/acme/players?x=1", forwarders: "n1", tenant: "acme")

    @Test func aSecretShorterThan32BytesIsRefusedWithoutItsBytesInTheMessage() throws {
        let error = #expect(throws: FleetError.self) { try FleetSecret(Data("short-secret-abc".utf8)) }
        #expect(error.map { "\($0)" }?.contains("16 bytes") == true)
        #expect(error.map { "\($0)" }?.contains("short-secret") == false)
        let secret = try FleetSecret(Data(repeating: 1, count: 32))
        #expect("\(secret)" == "FleetSecret(redacted)")
    }

    @Test func aProofIsValidForItsRequestWithinThirtySeconds() throws {
        let secret = try FleetSecret(Data(repeating: 1, count: 32))
        let now = Date()
        let proof = secret.forwardingProof(for: Self.request, at: now)
        #expect(secret.isValidForwardingProof(proof, for: Self.request, now: now))
        #expect(secret.isValidForwardingProof(proof, for: Self.request, now: now + 29))
        #expect(secret.isValidForwardingProof(proof, for: Self.request, now: now - 29))
        #expect(!secret.isValidForwardingProof(proof, for: Self.request, now: now + 31))
        #expect(!secret.isValidForwardingProof(proof, for: Self.request, now: now - 31))
    }

    @Test(arguments: [
        ForwardedRequest(method: "POST", target: "/tenants/acme/players?x=1", forwarders: "n1", tenant: "acme"),
        ForwardedRequest(method: "GET", target: "/tenants/acme/players?x=2", forwarders: "n1", tenant: "acme"),
        ForwardedRequest(method: "GET", target: "/tenants/acme/players?x=1", forwarders: "n2", tenant: "acme"),
        ForwardedRequest(method: "GET", target: "/tenants/acme/players?x=1", forwarders: "n1", tenant: "bravo"),
    ])
    func aProofIsInvalidForAnyOtherRequest(other: ForwardedRequest) throws {
        let secret = try FleetSecret(Data(repeating: 1, count: 32))
        #expect(!secret.isValidForwardingProof(secret.forwardingProof(for: Self.request), for: other))
    }

    @Test func aProofOfAnotherSecretOrAForgedOneIsInvalid() throws {
        let secret = try FleetSecret(Data(repeating: 1, count: 32))
        let other = try FleetSecret(Data(repeating: 2, count: 32))
        #expect(!secret.isValidForwardingProof(other.forwardingProof(for: Self.request), for: Self.request))
        let seconds = Int(Date().timeIntervalSince1970)
        for forged in ["", "zz", "\(seconds).", "\(seconds).\(String(repeating: "0", count: 64))", ".\(String(repeating: "a", count: 64))",
                       "\(seconds).\(String(repeating: "G", count: 64))", "-\(seconds).00", "\(seconds).\(String(repeating: "0", count: 64)).1"] {
            #expect(!secret.isValidForwardingProof(forged, for: Self.request), "\(forged)")
        }
    }
}
