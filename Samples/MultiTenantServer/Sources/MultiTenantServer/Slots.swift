import Hummingbird
import Synchronization

/// Slots of something scarce held per tenant and in total (event streams): ``acquire(_:)`` takes one, or throws ``TooManyRequests``
/// (429 with `Retry-After`) when the tenant or the server holds its cap.
///
/// ```swift
/// let slot = try streams.acquire("acme")
/// defer { slot.release() }
/// ```
final class Slots: Sendable {
    private struct State {
        var total = 0
        var byTenant: [String: Int] = [:]
    }

    /// What the slots are, for the 429's message ("event streams").
    let what: String
    let maxTotal: Int
    let maxPerTenant: Int
    private let state = Mutex(State())

    init(what: String, maxTotal: Int, maxPerTenant: Int) {
        self.what = what
        self.maxTotal = maxTotal
        self.maxPerTenant = maxPerTenant
    }

    /// A slot for `tenant`, released by ``Slot/release()`` (once).
    func acquire(_ tenant: String) throws(TooManyRequests) -> Slot {
        let refusal = state.withLock { state -> String? in
            if state.total >= maxTotal { return "The server holds its \(maxTotal) \(what): retry later." }
            if state.byTenant[tenant, default: 0] >= maxPerTenant { return "This tenant holds its \(maxPerTenant) \(what): close one, or retry later." }
            state.total += 1
            state.byTenant[tenant, default: 0] += 1
            return nil
        }
        if let refusal { throw TooManyRequests(message: refusal) }
        return Slot(slots: self, tenant: tenant)
    }

    fileprivate func release(_ tenant: String) {
        state.withLock { state in
            state.total -= 1
            let left = state.byTenant[tenant, default: 1] - 1
            state.byTenant[tenant] = left > 0 ? left : nil
        }
    }

    /// Slots in use.
    var count: Int { state.withLock { $0.total } }

    /// One slot; released once, whatever the number of calls.
    final class Slot: Sendable {
        private let slots: Slots
        private let tenant: String
        private let released = Atomic<Bool>(false)

        fileprivate init(slots: Slots, tenant: String) {
            self.slots = slots
            self.tenant = tenant
        }

        func release() {
            if !released.exchange(true, ordering: .acquiringAndReleasing) { slots.release(tenant) }
        }

        deinit { release() }
    }
}

/// 429 Too Many Requests, with `Retry-After`.
struct TooManyRequests: HTTPResponseError {
    var message: String
    var status: HTTPResponse.Status { .tooManyRequests }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        try HTTPError(.tooManyRequests, headers: [.retryAfter: "\(ServerLimits.retryAfterSeconds)"], message: message)
            .response(from: request, context: context)
    }
}
