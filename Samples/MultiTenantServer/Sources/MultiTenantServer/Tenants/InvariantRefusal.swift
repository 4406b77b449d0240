import Foundation
import GRDBRegistry
import GRDBRegistryExamples
import Hummingbird

/// 422: a write that breaks an invariant of the tenant's database
/// (`PlayerRepository.invariants`). Nothing of it was committed. The body
/// says what to fix to a person, and names the invariant for programs:
///
/// ```json
/// {"error":{"message":"A score can't be negative.","invariant":"nonNegativeScore"}}
/// ```
///
/// The page at `/` shows the message as it is.
struct InvariantRefusal: HTTPResponseError, CustomStringConvertible {
    var violation: InvariantViolation

    /// What a person reads: the invariant's own explanation
    /// (`PlayerRepository.invariants`), or a generic sentence for one
    /// without (its name stays in the body).
    var message: String {
        violation.explanation ?? "This change breaks a rule of the leaderboard: nothing was saved."
    }

    var status: HTTPResponse.Status { .unprocessableContent }
    var description: String { violation.description }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        let body = try JSONEncoder().encode(["error": ["message": message, "invariant": violation.invariant]])
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}
