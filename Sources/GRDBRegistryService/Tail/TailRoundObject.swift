import Foundation
import GRDBDigests
import GRDBRegistry

/// The bytes of one round of a single server's durable tail in its replica
/// store (``ReplicaStoreChangeLog``): the changes of every tenant appended
/// at once, and a SHA-256 of them all, so that a damaged or cut object is
/// refused rather than replayed.
///
/// Layout (integers big-endian): `GRDBTAIL`, version `1`, the number of
/// changes (32 bits), then each change: its tenant id's length (16 bits)
/// and UTF-8 bytes, epoch and sequence (64 bits each), schema version (32
/// bits), payload length (32 bits) and payload; last, the SHA-256 of
/// everything before it.
enum TailRoundObject {
    private static let magic = Array("GRDBTAIL".utf8)
    private static let version: UInt8 = 1
    private static let digestLength = 32

    static func encode(_ changes: [LoggedChange]) -> Data {
        var bytes = magic
        bytes.append(version)
        append(UInt32(changes.count), to: &bytes)
        for change in changes {
            let tenant = Array(change.tenant.rawValue.utf8)
            append(UInt16(tenant.count), to: &bytes)
            bytes += tenant
            append(change.epoch, to: &bytes)
            append(change.sequence, to: &bytes)
            append(UInt32(bitPattern: change.schemaVersion), to: &bytes)
            append(UInt32(change.payload.count), to: &bytes)
            bytes += change.payload
        }
        bytes += SHA256.digest(of: bytes)
        return Data(bytes)
    }

    /// The changes of the object at `key`.
    ///
    /// - throws: ``DatabaseServiceError/tailObjectDamaged(key:reason:)``
    ///   when the bytes are not a whole round of this layout.
    static func decode(_ data: Data, key: String) throws -> [LoggedChange] {
        let bytes = [UInt8](data)
        func damaged(_ reason: String) -> DatabaseServiceError { .tailObjectDamaged(key: key, reason: reason) }
        guard bytes.count >= magic.count + 1 + 4 + digestLength else {
            throw damaged("\(bytes.count) bytes, shorter than any round")
        }
        guard bytes.starts(with: magic) else { throw damaged("it does not start with GRDBTAIL") }
        guard bytes[magic.count] == version else {
            throw damaged("version \(bytes[magic.count]), this build reads version \(version)")
        }
        let body = bytes[..<(bytes.count - digestLength)]
        guard SHA256.digest(of: Array(body)) == Array(bytes[(bytes.count - digestLength)...]) else {
            throw damaged("its SHA-256 does not match its bytes")
        }
        var reader = Reader(bytes: body, offset: magic.count + 1)
        guard let count = reader.integer(UInt32.self) else { throw damaged("cut in its count") }
        var changes: [LoggedChange] = []
        for index in 0..<Int(count) {
            guard let tenantLength = reader.integer(UInt16.self), let tenantBytes = reader.bytes(Int(tenantLength)),
                let epoch = reader.integer(UInt64.self), let sequence = reader.integer(UInt64.self),
                let schema = reader.integer(UInt32.self), let payloadLength = reader.integer(UInt32.self),
                let payload = reader.bytes(Int(payloadLength))
            else {
                throw damaged("cut in change \(index + 1) of \(count)")
            }
            let tenant: TenantID
            do {
                tenant = try TenantID(String(decoding: tenantBytes, as: UTF8.self))
            } catch {
                throw damaged("change \(index + 1) names no valid tenant: \(error)")
            }
            changes.append(LoggedChange(
                tenant: tenant, epoch: epoch, sequence: sequence, schemaVersion: Int32(bitPattern: schema), payload: Data(payload)))
        }
        guard reader.offset == body.endIndex else { throw damaged("\(body.endIndex - reader.offset) bytes after its last change") }
        return changes
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { bytes += $0 }
    }

    private struct Reader {
        let bytes: ArraySlice<UInt8>
        var offset: Int

        mutating func bytes(_ count: Int) -> ArraySlice<UInt8>? {
            guard count >= 0, bytes.endIndex - offset >= count else { return nil }
            defer { offset += count }
            return bytes[offset..<(offset + count)]
        }

        mutating func integer<T: FixedWidthInteger>(_: T.Type) -> T? {
            guard let slice = bytes(MemoryLayout<T>.size) else { return nil }
            return slice.reduce(T.zero) { $0 << 8 | T($1) }
        }
    }
}
