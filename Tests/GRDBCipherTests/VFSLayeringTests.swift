import Foundation
import Testing

/// The VFS's C files form layers: `Internal.h` declares what crosses files,
/// one section per file, in layer order, and a file uses only what the
/// sections above its own declare. No two files then call each other, so
/// the call circles that the architecture review found (IOMethods.c with
/// four files, Codec.c with KeyDerivation.c) cannot come back unnoticed.
@Suite struct VFSLayeringTests {
    static let vfs = repositoryRoot.appendingPathComponent("Sources/CSQLCipherVFS")

    /// Internal.h's sections: (file, symbols it declares), in order.
    static func sections() throws -> [(file: String, symbols: [String])] {
        let header = try String(contentsOf: vfs.appendingPathComponent("Internal.h"), encoding: .utf8)
        var sections: [(file: String, symbols: [String])] = []
        for line in header.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("// "), line.hasSuffix(".c"), !line.dropFirst(3).contains(" ") {
                sections.append((String(line.dropFirst(3)), []))
            } else if line.hasPrefix("HIDDEN "), !sections.isEmpty {
                // The name before the parameter list, or before `;` for data.
                let name = line.firstMatch(of: /([A-Za-z_]\w*)\s*\(/)?.1 ?? line.firstMatch(of: /([A-Za-z_]\w*)\s*;/)?.1
                let symbol = try #require(name.map(String.init), "can't read the name declared by: \(line)")
                sections[sections.count - 1].symbols.append(symbol)
            }
        }
        return sections
    }

    /// The source without comments and string literals, which may name
    /// functions without calling them.
    static func code(of file: String) throws -> String {
        let text = try String(contentsOf: vfs.appendingPathComponent(file), encoding: .utf8)
        return text
            .replacing(/\/\*(.|\n)*?\*\//, with: "")
            .replacing(/\/\/[^\n]*/, with: "")
            .replacing(/"(\\.|[^"\\\n])*"/, with: "\"\"")
    }

    @Test func everyFileUsesOnlyTheFilesDeclaredAboveItsOwnInInternalH() throws {
        let sections = try Self.sections()
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.vfs.path).filter { $0.hasSuffix(".c") }.sorted()
        // The public C API sits above every section.
        let top = ["VFS.c", "Connections.c"]
        #expect(Set(sections.map(\.file)).count == sections.count, "a file has two sections")
        #expect(Set(files) == Set(sections.map(\.file) + top), "every .c file has its place in Internal.h's order (or is the public API: \(top))")
        let layer = Dictionary(uniqueKeysWithValues: sections.enumerated().map { ($1.file, $0) } + top.map { ($0, sections.count) })
        for (owner, symbols) in sections {
            let ownerCode = try Self.code(of: owner)
            for symbol in symbols {
                // Each symbol is defined where its section says.
                let definition = try Regex("(?m)^HIDDEN[^;]*\\b\(symbol)\\b[^;]*[{=]")
                #expect(ownerCode.contains(definition), "\(symbol) is declared under \(owner) in Internal.h, but not defined there")
            }
        }
        var upward: [String] = []
        for file in files {
            let code = try Self.code(of: file)
            let own = try #require(layer[file])
            for (owner, symbols) in sections where owner != file {
                for symbol in symbols where code.contains(try Regex("\\b\(symbol)\\b")) {
                    if try #require(layer[owner]) > own { upward.append("\(file) uses \(symbol) of \(owner)") }
                }
            }
        }
        #expect(upward.isEmpty, "uses that run up the layers (move the function, or the file's section): \(upward)")
    }
}
