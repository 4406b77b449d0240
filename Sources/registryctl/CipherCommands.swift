import ArgumentParser
import Foundation
import GRDBCipher
import GRDBMigrations

/// The key of an encrypted database: from an environment variable or a
/// file, never from the command line.
struct CipherKeyOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The environment variable that holds the key (a passphrase, or x'<hex>').", valueName: "var"))
    var keyEnv: String?

    @Option(help: ArgumentHelp("The file that holds the key (a passphrase, or x'<hex>').", valueName: "path"))
    var keyFile: String?

    @Option(help: "The SQLCipher format version: 3 or 4.")
    var compatibility: Int = 4

    @Option(help: ArgumentHelp("The encrypted database's cipher_page_size: a power of two from 1024 to 65536 (default: 4096 for version 4, 1024 for version 3).", valueName: "bytes"))
    var pageSize: Int?

    func validate() throws {
        guard (keyEnv == nil) != (keyFile == nil) else { throw ValidationError("Pass --key-env VAR or --key-file PATH (exactly one).") }
        guard compatibility == 3 || compatibility == 4 else { throw ValidationError("--compatibility is 3 or 4.") }
        if let pageSize, !(1024...65536).contains(pageSize) || pageSize & (pageSize - 1) != 0 {
            throw ValidationError("--page-size is a power of two from 1024 to 65536.")
        }
    }

    var cipherCompatibility: CipherCompatibility { compatibility == 3 ? .v3 : .v4 }

    func key() throws -> CipherKey {
        try Self.key(environment: keyEnv, file: keyFile)
    }

    static func key(environment: String?, file: String?) throws -> CipherKey {
        let source: KeySource = environment.map(KeySource.environment) ?? .file(file ?? "")
        return try CipherKey(source.read())
    }
}

/// Runs a cipher command: a one-line reason and exit status 1 on failure.
private func runCipherCommand(_ body: () throws -> Void) throws {
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

    func run() throws {
        try runCipherCommand {
            guard !FileManager.default.fileExists(atPath: output) else { throw ValidationError("\(output) already exists.") }
            try CipherDatabase.encryptedCopy(ofPlaintextAt: input, to: output, with: key.key(), compatibility: key.cipherCompatibility, pageSize: key.pageSize)
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

    func run() throws {
        try runCipherCommand {
            guard !FileManager.default.fileExists(atPath: output) else { throw ValidationError("\(output) already exists.") }
            try CipherDatabase.exportPlaintext(atPath: input, key: key.key(), to: output, compatibility: key.cipherCompatibility, pageSize: key.pageSize)
            print("\(output): plaintext copy of \(input)")
        }
    }
}

struct RekeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rekey", abstract: "Replace the key of an encrypted database, atomically.")

    @Argument(help: "The encrypted database.") var database: String
    @OptionGroup var key: CipherKeyOptions

    @Option(help: ArgumentHelp("The environment variable that holds the new key.", valueName: "var"))
    var newKeyEnv: String?

    @Option(help: ArgumentHelp("The file that holds the new key.", valueName: "path"))
    var newKeyFile: String?

    @Option(help: ArgumentHelp("The cipher_page_size of the re-encrypted database (default: the same as --page-size).", valueName: "bytes"))
    var newPageSize: Int?

    func validate() throws {
        guard (newKeyEnv == nil) != (newKeyFile == nil) else { throw ValidationError("Pass --new-key-env VAR or --new-key-file PATH (exactly one).") }
        if let newPageSize, !(1024...65536).contains(newPageSize) || newPageSize & (newPageSize - 1) != 0 {
            throw ValidationError("--new-page-size is a power of two from 1024 to 65536.")
        }
    }

    func run() throws {
        try runCipherCommand {
            let newKey = try CipherKeyOptions.key(environment: newKeyEnv, file: newKeyFile)
            try CipherDatabase.rekey(atPath: database, from: key.key(), to: newKey, compatibility: key.cipherCompatibility,
                                     pageSize: key.pageSize, newPageSize: newPageSize)
            print("\(database): rekeyed")
        }
    }
}

struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check an encrypted database as SQLCipher of its version would open it: format parameters, every page's HMAC, SQLite's integrity check.")

    @Argument(help: "The encrypted database.") var database: String
    @OptionGroup var key: CipherKeyOptions

    func run() throws {
        try runCipherCommand {
            let inspection = try CipherDatabase.inspect(atPath: database, key: key.key(), compatibility: key.cipherCompatibility, pageSize: key.pageSize)
            print("\(database): \(inspection.format)")
            if let problem = inspection.problem {
                throw CipherCommandError(message: "\(database): \(problem)")
            }
            print("\(database): ok")
        }
    }
}

struct CipherCommandError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
