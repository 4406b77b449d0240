import Foundation

/// The access key a ``SigV4Signer`` signs with: an access key ID, its
/// secret, and a session token for temporary credentials.
///
/// Its description never shows the secret or the token, so credentials can
/// be logged by accident without leaking:
///
/// ```swift
/// let credentials = S3Credentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "secret")
/// print(credentials) // S3Credentials(AKIAIOSFODNN7EXAMPLE, secret hidden)
/// ```
public struct S3Credentials: Sendable, Equatable, CustomStringConvertible {
    /// The access key ID (`AWS_ACCESS_KEY_ID`).
    public var accessKeyID: String
    /// The secret access key (`AWS_SECRET_ACCESS_KEY`).
    public var secretAccessKey: String
    /// The session token of temporary credentials (`AWS_SESSION_TOKEN`).
    public var sessionToken: String?

    /// Credentials from explicit values.
    ///
    /// ```swift
    /// let credentials = S3Credentials(accessKeyID: "AKIA…", secretAccessKey: "…", sessionToken: nil)
    /// ```
    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    public var description: String {
        "S3Credentials(\(accessKeyID), secret hidden\(sessionToken == nil ? "" : ", session token hidden"))"
    }
}

extension S3Credentials {
    /// The credentials of `profile` in the shared credentials file at
    /// `path` (the INI file `aws configure` writes).
    ///
    /// The file is refused, unread, when its group or other users may read
    /// or write it (like a key file): a secret others could read must be
    /// replaced, not used.
    ///
    /// ```swift
    /// let credentials = try S3Credentials.fromSharedFile(atPath: "/home/app/.aws/credentials")
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidConfiguration(reason:)`` naming
    ///   the file and what is wrong with it.
    public static func fromSharedFile(atPath path: String, profile: String = "default") throws -> S3Credentials {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw ReplicaStoreError.invalidConfiguration(reason: "credentials file \(path) can't be read: \(String(cString: strerror(errno)))")
        }
        let mode = status.st_mode & 0o777
        if mode & 0o077 != 0 {
            throw ReplicaStoreError.invalidConfiguration(
                reason: "credentials file \(path) has mode \(String(mode, radix: 8)), so its group or other users can read or change it: "
                    + "make it readable by its owner only (chmod 600 \(path)), and replace the keys if others may have read them")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ReplicaStoreError.invalidConfiguration(reason: "credentials file \(path) can't be read")
        }
        var values: [String: String] = [:]
        var section: String?
        for rawLine in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                section = line.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
                continue
            }
            guard section == profile, let equals = line.firstIndex(of: "=") else { continue }
            let name = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            values[name] = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        }
        guard let keyID = values["aws_access_key_id"], !keyID.isEmpty,
              let secret = values["aws_secret_access_key"], !secret.isEmpty
        else {
            throw ReplicaStoreError.invalidConfiguration(
                reason: "credentials file \(path) has no aws_access_key_id and aws_secret_access_key in profile [\(profile)]")
        }
        let token = values["aws_session_token"].flatMap { $0.isEmpty ? nil : $0 }
        return S3Credentials(accessKeyID: keyID, secretAccessKey: secret, sessionToken: token)
    }
}
