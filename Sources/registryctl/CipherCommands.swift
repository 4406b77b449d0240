import ArgumentParser
import Foundation
import GRDBBackup
import GRDBCipher
import GRDBMigrations

/// The key of an encrypted database: from an environment variable or a
/// file, never from the command line; and its SQLCipher format.
struct CipherKeyOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The environment variable that holds the key (a passphrase, or x'<hex>').", valueName: "var"))
    var keyEnv: String?

    @Option(help: ArgumentHelp("The file that holds the key (a passphrase, or x'<hex>').", valueName: "path"))
    var keyFile: String?

    @Option(help: "The SQLCipher format version: 3 or 4 (default: 4).")
    var compatibility: Int?

    @Option(help: ArgumentHelp("The encrypted database's cipher_page_size: \(CipherFileFormat.pageSizeRule) (default: 4096 for version 4, 1024 for version 3).", valueName: "bytes"))
    var pageSize: Int?

    func validate() throws {
        if keyEnv != nil && keyFile != nil { throw ValidationError("Pass --key-env VAR or --key-file PATH, not both.") }
        if let compatibility, compatibility != 3 && compatibility != 4 { throw ValidationError("--compatibility is 3 or 4.") }
        if let pageSize, !CipherFileFormat.isValidPageSize(pageSize) {
            throw ValidationError("--page-size is \(CipherFileFormat.pageSizeRule).")
        }
    }

    /// Whether any of these options was given.
    var isGiven: Bool { keyEnv != nil || keyFile != nil || compatibility != nil || pageSize != nil }

    /// For the commands that need a key.
    func requireKey() throws {
        guard keyEnv != nil || keyFile != nil else { throw ValidationError("Pass --key-env VAR or --key-file PATH.") }
    }

    var cipherCompatibility: CipherCompatibility { compatibility == 3 ? .v3 : .v4 }

    func key() throws -> CipherKey {
        try Self.key(environment: keyEnv, file: keyFile)
    }

    /// How `backup` and `restore --database PATH` open the file: nil
    /// without a key (a plain file).
    func backupEncryption() throws -> BackupEncryption? {
        guard keyEnv != nil || keyFile != nil else { return nil }
        return BackupEncryption(key: try key(), compatibility: cipherCompatibility, pageSize: pageSize)
    }

    static func key(environment: String?, file: String?) throws -> CipherKey {
        let source: KeySource = environment.map(KeySource.environment) ?? .file(file ?? "")
        return try CipherKey(source.read())
    }
}

/// Runs a cipher command: a one-line reason and exit status 1 on failure.
func runCipherCommand(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch {
        FileHandle.standardError.write(Data("registryctl: \(error)\n".utf8))
        throw ExitCode(1)
    }
}

struct EncryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt", abstract: "Write an encrypted copy of a plaintext database (the input is only read; it may have any page size, the copy gets --page-size).")

    @Option(name: .customLong("in"), help: "The plaintext database.") var input: String
    @Option(name: .customLong("out"), help: "The encrypted database to create.") var output: String
    @OptionGroup var key: CipherKeyOptions

    func validate() throws { try key.requireKey() }

    func run() throws {
        try runCipherCommand {
            guard !FileManager.default.fileExists(atPath: output) else { throw ValidationError("\(output) already exists.") }
            let output = self.output
            try FileProgress(verb: "MB encrypted", total: FileProgress.size(ofFileAt: input), written: { FileProgress.size(ofFileAt: output) }).run {
                try CipherDatabase.encryptedCopy(ofPlaintextAt: input, to: output, with: key.key(), compatibility: key.cipherCompatibility, pageSize: key.pageSize)
            }
            print("\(output): encrypted copy of \(input)")
        }
    }
}

struct DecryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decrypt", abstract: "Write a plaintext copy of an encrypted database (the input is only read).")

    @Option(name: .customLong("in"), help: "The encrypted database.") var input: String
    @Option(name: .customLong("out"), help: "The plaintext database to create.") var output: String
    @OptionGroup var key: CipherKeyOptions

    func validate() throws { try key.requireKey() }

    func run() throws {
        try runCipherCommand {
            guard !FileManager.default.fileExists(atPath: output) else { throw ValidationError("\(output) already exists.") }
            let output = self.output
            try FileProgress(verb: "MB decrypted", total: FileProgress.size(ofFileAt: input), written: { FileProgress.size(ofFileAt: output) }).run {
                try CipherDatabase.exportPlaintext(atPath: input, key: key.key(), to: output, compatibility: key.cipherCompatibility, pageSize: key.pageSize)
            }
            print("\(output): plaintext copy of \(input)")
        }
    }
}

struct CipherCommandError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
