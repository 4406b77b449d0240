extension AsyncSequence {
    /// Transforms a sequence of optional values into a sequence of
    /// ``Presence`` that remembers the last non-nil value.
    ///
    /// ```swift
    /// // nil, 1, nil, nil, 3 becomes:
    /// // .missing, .existing(1), .gone(1), .gone(1), .existing(3)
    /// for try await presence in optionalPlayers.scanPresence() { ... }
    /// ```
    public func scanPresence<Wrapped>() -> AsyncPresenceSequence<Self, Wrapped> where Element == Wrapped? {
        AsyncPresenceSequence(base: self)
    }
}

/// An async sequence of ``Presence``, built by ``_Concurrency/AsyncSequence/scanPresence()``.
public struct AsyncPresenceSequence<Base: AsyncSequence, Wrapped>: AsyncSequence where Base.Element == Wrapped? {
    public typealias Element = Presence<Wrapped>
    public typealias Failure = Base.Failure

    let base: Base

    public func makeAsyncIterator() -> Iterator {
        Iterator(base: base.makeAsyncIterator())
    }

    public struct Iterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        var presence = Presence<Wrapped>.missing

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(Base.Failure) -> Presence<Wrapped>? {
            guard let value = try await base.next(isolation: actor) else { return nil }
            presence = presence.next(value)
            return presence
        }

        public mutating func next() async throws -> Presence<Wrapped>? {
            try await next(isolation: nil)
        }
    }
}

extension AsyncPresenceSequence: Sendable where Base: Sendable { }
