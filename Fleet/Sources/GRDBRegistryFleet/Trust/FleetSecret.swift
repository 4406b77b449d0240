import Crypto
import Foundation

/// The secret every node of a fleet holds and PostgreSQL does not: what
/// makes a node a node.
///
/// Whoever can write the fleet's tables could otherwise register a "node"
/// at any address, and the real nodes would forward it their tenants'
/// requests, tokens included. With the secret, each node signs its row of
/// `fleet_nodes` (its id, session and address) when it joins, and every
/// node checks that signature on every read: a row that fails is a
/// ``FleetError/invalidRow(table:key:reason:)``, logged, counted in
/// `fleet_invalid_rows_total`, and never forwarded to, redirected to or
/// given a tenant. A node also proves to its peers that it forwarded a
/// request (``forwardingProof(for:at:)``).
///
/// A tenant whose owner is such a row is not claimed back while
/// PostgreSQL says that owner's lease is live: the row may be a real
/// node's whose address someone altered, and that node still serves the
/// tenant (a claim would make two writers). It is unavailable on the other
/// nodes until the row is fixed or its lease lapses.
///
/// The library never reads a file or a variable for it: the application
/// does (as it does its master key) and hands the bytes here. Two keys are
/// derived from it (HKDF-SHA256), one per use, so that a row signature is
/// never a valid forwarding proof or the reverse.
///
/// ```swift
/// let secret = try FleetSecret(Data(String(repeating: "s", count: 32).utf8))
/// let configuration = FleetConfiguration(
///     postgres: "postgres://fleet@db.internal:5432/fleet", nodeID: "n1",
///     address: "http://10.0.0.11:8080", secret: secret)
/// ```
///
/// ## Topics
///
/// ### Forwarding
///
/// - ``ForwardedRequest``
/// - ``forwardingProof(for:at:)``
/// - ``isValidForwardingProof(_:for:now:)``
/// - ``forwardingProofValidity``
public struct FleetSecret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The fewest bytes a secret may have: 32 (256 bits).
    public static let minimumLength = 32

    /// How long a forwarding proof is valid, either side of its time (the
    /// clocks of two nodes differ a little): 30 seconds.
    public static let forwardingProofValidity: Duration = .seconds(30)

    let rowKey: SymmetricKey
    let forwardingKey: SymmetricKey

    /// - throws: ``FleetError/invalidConfiguration(_:)`` when `secret` is
    ///   shorter than ``minimumLength`` bytes (its bytes are never in the
    ///   message).
    public init(_ secret: some DataProtocol) throws {
        guard secret.count >= Self.minimumLength else {
            throw FleetError.invalidConfiguration("the fleet secret has \(secret.count) bytes; it needs \(Self.minimumLength) or more (openssl rand -hex 32)")
        }
        let material = SymmetricKey(data: Data(secret))
        func derive(_ use: String) -> SymmetricKey {
            HKDF<SHA256>.deriveKey(inputKeyMaterial: material, salt: Data("GRDBRegistryFleet".utf8), info: Data(use.utf8), outputByteCount: 32)
        }
        rowKey = derive("fleet_nodes row v1")
        forwardingKey = derive("forwarding proof v1")
    }

    /// Whether both are the same secret (compared in constant time).
    public static func == (lhs: FleetSecret, rhs: FleetSecret) -> Bool {
        lhs.rowKey == rhs.rowKey && lhs.forwardingKey == rhs.forwardingKey
    }

    public var description: String { "FleetSecret(redacted)" }
    public var debugDescription: String { description }

    /// The signature of a node's row: HMAC-SHA256 of its id, session and
    /// address, hex.
    func rowSignature(nodeID: String, session: UUID, address: String) -> String {
        Self.hex(HMAC<SHA256>.authenticationCode(for: Self.fields([nodeID, session.uuidString.lowercased(), address]), using: rowKey))
    }

    /// Whether `signature` is that of the row (compared in constant time).
    func isValidRowSignature(_ signature: String?, nodeID: String, session: UUID, address: String) -> Bool {
        guard let signature, let code = Self.bytes(hex: signature) else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(code, authenticating: Self.fields([nodeID, session.uuidString.lowercased(), address]), using: rowKey)
    }

    /// Each field with its length first: no two lists of fields give the
    /// same bytes.
    static func fields(_ values: [String]) -> Data {
        var data = Data()
        for value in values {
            let bytes = Data(value.utf8)
            withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { data.append(contentsOf: $0) }
            data.append(bytes)
        }
        return data
    }

    static func hex(_ code: some Sequence<UInt8>) -> String {
        code.map { String(format: "%02x", $0) }.joined()
    }

    static func bytes(hex: String) -> Data? {
        let digits = Array(hex.utf8)
        guard digits.count == 64 else { return nil }
        var data = Data(capacity: 32)
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            data.append(high << 4 | low)
            index += 2
        }
        return data
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
