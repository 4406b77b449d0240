import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Counts the times any process opens one file, seen from the kernel
/// (Linux inotify): how many times a key file was read, by this process or
/// by a child, without changing the code that reads it.
///
/// ```swift
/// let reads = try FileOpenCounter(path: keyFile)
/// _ = try KeySource.file(keyFile).read()
/// #expect(reads.opens() == 1)
/// ```
public final class FileOpenCounter {
    private let descriptor: Int32
    private var counted = 0

    /// Counts the opens of `path` from now on.
    public init(path: String) throws {
        // IN_NONBLOCK | IN_CLOEXEC: `opens()` reads what is queued and
        // returns.
        descriptor = inotify_init1(0o4000 | 0o2000000)
        guard descriptor >= 0 else { throw CocoaError(.fileReadUnknown, userInfo: [NSFilePathErrorKey: path]) }
        // IN_OPEN | IN_CLOSE_NOWRITE: queued by the open(2) and close(2)
        // themselves, so an open that returned is counted by the next
        // `opens()`. The closes are watched because inotify merges an
        // event with an identical one still queued: two opens in a row
        // would count as one; an open, a close, an open count as two.
        guard inotify_add_watch(descriptor, path, 0x20 | 0x10) >= 0 else {
            close(descriptor)
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path])
        }
    }

    deinit { close(descriptor) }

    /// The number of opens of the file since the counter was made.
    public func opens() -> Int {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            // struct inotify_event: wd, mask, cookie, len (4 bytes each),
            // then `len` bytes of name (none for a watched file).
            var offset = 0
            while offset + 16 <= count {
                let mask = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self) }
                let length = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self) }
                if mask & 0x20 != 0 { counted += 1 }
                offset += 16 + Int(length)
            }
        }
        return counted
    }
}
