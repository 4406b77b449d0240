import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// The parts of S3's XML answers the backend reads: a ListObjectsV2 page
/// and an error body. Parsed with Foundation's XMLParser; a document that
/// doesn't parse, or a page without the elements S3 always sends, is an
/// error rather than an empty answer.
struct S3ListPage: Equatable {
    var objects: [(key: String, size: Int64)]
    var isTruncated: Bool
    var nextContinuationToken: String?

    static func == (lhs: S3ListPage, rhs: S3ListPage) -> Bool {
        lhs.objects.map(\.key) == rhs.objects.map(\.key) && lhs.objects.map(\.size) == rhs.objects.map(\.size)
            && lhs.isTruncated == rhs.isTruncated && lhs.nextContinuationToken == rhs.nextContinuationToken
    }

    /// Parses a ListBucketResult; `nil` when the document is malformed or
    /// lacks `IsTruncated`, or an object lacks its key or a numeric size.
    static func parse(_ data: Data) -> S3ListPage? {
        let collector = ElementCollector()
        guard collector.parse(data), collector.root == "ListBucketResult" else { return nil }
        var objects: [(key: String, size: Int64)] = []
        for contents in collector.contents {
            guard let key = contents["Key"], !key.isEmpty, let sizeText = contents["Size"], let size = Int64(sizeText), size >= 0 else { return nil }
            objects.append((key, size))
        }
        guard let truncated = collector.topLevel["IsTruncated"], truncated == "true" || truncated == "false" else { return nil }
        let token = collector.topLevel["NextContinuationToken"].flatMap { $0.isEmpty ? nil : $0 }
        return S3ListPage(objects: objects, isTruncated: truncated == "true", nextContinuationToken: token)
    }
}

/// An S3 error body: `<Error><Code>…</Code><Message>…</Message></Error>`.
struct S3ErrorBody {
    var code: String
    var message: String

    /// The error's code and message, or `nil` when `data` is not an S3
    /// error document (an empty body, a proxy's HTML page).
    static func parse(_ data: Data) -> S3ErrorBody? {
        let collector = ElementCollector()
        guard !data.isEmpty, collector.parse(data), collector.root == "Error", let code = collector.topLevel["Code"] else { return nil }
        return S3ErrorBody(code: code, message: collector.topLevel["Message"] ?? "")
    }
}

/// Collects the text of the root's direct children, and of the children
/// of each `Contents` element (one dictionary per object).
private final class ElementCollector: NSObject, XMLParserDelegate {
    var root: String?
    var topLevel: [String: String] = [:]
    var contents: [[String: String]] = []
    private var path: [String] = []
    private var text = ""

    func parse(_ data: Data) -> Bool {
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = true
        parser.delegate = self
        return parser.parse()
    }

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
        if path.isEmpty { root = elementName }
        path.append(elementName)
        if path.count == 2 && elementName == "Contents" { contents.append([:]) }
        text = ""
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        text += string
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        if path.count == 2 {
            topLevel[elementName] = text
        } else if path.count == 3 && path[1] == "Contents", !contents.isEmpty {
            contents[contents.count - 1][elementName] = text
        }
        path.removeLast()
        text = ""
    }
}
