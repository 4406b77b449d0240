import Hummingbird
import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Synchronization

/// The open connections of the server, against their cap
/// (``ServerLimits/maxConnections``).
final class ConnectionCount: Sendable {
    let limit: Int
    private let open = Atomic<Int>(0)

    init(limit: Int) {
        self.limit = limit
    }

    /// Counts a new connection; false when it is one too many (it is
    /// counted anyway, and must be released like the others).
    func admit() -> Bool {
        open.wrappingAdd(1, ordering: .relaxed).newValue <= limit
    }

    func release() {
        open.wrappingSubtract(1, ordering: .relaxed)
    }

    var current: Int { open.load(ordering: .relaxed) }
}

/// Caps the open connections: one beyond ``ConnectionCount/limit`` is
/// answered `429 Too Many Requests` with `Retry-After`, at once (before
/// it sends anything: a client that opens connections without requests
/// holds descriptors as well), and closed. Each connection of the server
/// gets one (`HTTP1Channel.Configuration.additionalChannelHandlers`).
///
/// Idle connections, a partial request included, are closed by
/// Hummingbird's `idleTimeout`.
final class ConnectionLimiter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    private let count: ConnectionCount
    private var counted = false
    private var refused = false

    init(count: ConnectionCount) {
        self.count = count
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { admit(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        admit(context: context)
    }

    private func admit(context: ChannelHandlerContext) {
        guard !counted else { return }
        counted = true
        if !count.admit() {
            refused = true
            var headers = HTTPFields()
            headers[.retryAfter] = "\(ServerLimits.retryAfterSeconds)"
            headers[.connection] = "close"
            headers[.contentType] = "application/json; charset=utf-8"
            let body = ByteBuffer(string: #"{"error":{"message":"Too many connections: retry later."}}"#)
            headers[.contentLength] = "\(body.readableBytes)"
            context.write(wrapOutboundOut(.head(HTTPResponse(status: .tooManyRequests, headerFields: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(body)), promise: nil)
            // Closed once the answer is written: a close before would drop it.
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                bound.value.close(promise: nil)
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A refused connection's requests reach no route.
        guard !refused else { return }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        release()
    }

    private func release() {
        if counted {
            counted = false
            count.release()
        }
    }
}
