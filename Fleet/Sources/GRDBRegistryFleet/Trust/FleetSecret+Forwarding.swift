import Crypto
import Foundation

/// What a forwarding proof binds: a request as one node forwards it to
/// another.
///
/// ```swift
/// let request = ForwardedRequest(method: "GET", target: "/tenants/acme/players?x=1", forwarders: "n1", tenant: "acme")
/// ```
public struct ForwardedRequest: Sendable, Equatable {
    /// The HTTP method.
    public var method: String
    /// The request target as sent: path and query.
    public var target: String
    /// The nodes the request went through, as the forwarded request names
    /// them (`n1` or `n1, n2`): the last one made the proof.
    public var forwarders: String
    /// The tenant of the route.
    public var tenant: String

    /// The request `method target` of `tenant`, forwarded through `forwarders`.
    public init(method: String, target: String, forwarders: String, tenant: String) {
        self.method = method
        self.target = target
        self.forwarders = forwarders
        self.tenant = tenant
    }
}

extension FleetSecret {
    /// A proof that a node holding the secret forwarded `request` at
    /// `date`: `<unix seconds>.<HMAC-SHA256 hex>`, valid for
    /// ``forwardingProofValidity`` either side of `date`.
    ///
    /// A node that receives a request saying it was forwarded trusts that
    /// only with a valid proof (``isValidForwardingProof(_:for:now:)``); a
    /// client can't make one, so its claim costs nothing.
    ///
    /// ```swift
    /// let proof = secret.forwardingProof(for: request)
    /// // the owner:
    /// let trusted = secret.isValidForwardingProof(proof, for: request)
    /// ```
    public func forwardingProof(for request: ForwardedRequest, at date: Date = Date()) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        return "\(seconds)." + Self.hex(HMAC<SHA256>.authenticationCode(for: Self.fields(request, seconds: seconds), using: forwardingKey))
    }

    /// Whether `proof` was made for `request` by a holder of the secret
    /// within ``forwardingProofValidity`` of `now` (the code compared in
    /// constant time).
    public func isValidForwardingProof(_ proof: String, for request: ForwardedRequest, now: Date = Date()) -> Bool {
        let parts = proof.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].utf8.count <= 19, parts[0].allSatisfy(\.isASCII), let seconds = Int64(parts[0]),
              let code = Self.bytes(hex: String(parts[1])) else { return false }
        let validity = Double(Self.forwardingProofValidity.components.seconds)
        guard abs(now.timeIntervalSince1970 - Double(seconds)) <= validity else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(code, authenticating: Self.fields(request, seconds: seconds), using: forwardingKey)
    }

    private static func fields(_ request: ForwardedRequest, seconds: Int64) -> Data {
        fields([request.method, request.target, request.forwarders, request.tenant, "\(seconds)"])
    }
}
