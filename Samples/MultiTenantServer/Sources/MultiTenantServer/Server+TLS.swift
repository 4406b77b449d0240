import Foundation
import HummingbirdTLS
import NIOSSL

extension MultiTenantServer {
    /// The server side of TLS: the PEM certificate chain and private key,
    /// TLS 1.2 at least.
    static func tlsConfiguration(certificate: String, key: String) throws -> TLSConfiguration {
        let chain: [NIOSSLCertificate]
        let privateKey: NIOSSLPrivateKey
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificate)
            privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
        } catch {
            throw UsageError(message: "cannot load the TLS certificate \(certificate) and key \(key) (PEM files expected): \(error)")
        }
        guard !chain.isEmpty else { throw UsageError(message: "the TLS certificate file \(certificate) holds no certificate") }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(privateKey))
        configuration.minimumTLSVersion = .tlsv12
        return configuration
    }
}
