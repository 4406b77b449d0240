/// The `NNNN_description.sql` naming rule of migration files.
enum MigrationFileName {
    /// Returns the number and description of a valid file name, or nil.
    ///
    /// The number has at least four digits so that a plain `ls` lists files
    /// in the order they apply.
    static func parse(_ fileName: String) -> (number: Int, description: String)? {
        guard fileName.hasSuffix(".sql") else { return nil }
        let stem = fileName.dropLast(4)
        guard let underscore = stem.firstIndex(of: "_") else { return nil }
        let digits = stem[..<underscore]
        let description = stem[stem.index(after: underscore)...]
        guard digits.count >= 4, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
              let number = Int(digits),
              isValidDescription(description)
        else { return nil }
        return (number, String(description))
    }

    static func isValidDescription(_ description: some StringProtocol) -> Bool {
        !description.isEmpty && description.allSatisfy { character in
            character.isASCII && (character.isLetter || character.isNumber || character == "_" || character == "-")
        }
    }

    static func identifier(number: Int, description: String) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits + "_" + description
    }
}
