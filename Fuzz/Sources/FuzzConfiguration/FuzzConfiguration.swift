import Foundation
import GRDBRegistryService

// Configuration files: RegistryConfiguration, the one file the daemon and
// registryctl both read. It loads, or throws its typed error listing the
// problems; nothing else (a crash, a hang, another error type) passes.

private let directory: URL = {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("FuzzConfiguration-\(getpid())")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    let environment = ["GRDBREGISTRY_TENANTS_ROOT": directory.path, "TENANT_MASTER_KEY": String(repeating: "ab", count: 32)]
    do {
        let configuration = try RegistryConfiguration.parse(data, baseDirectory: directory, environment: environment)
        // A loaded configuration can be checked against the machine.
        _ = configuration.problems(environment: environment)
    } catch let error as RegistryConfigurationError {
        if error.problems.isEmpty { fatalError("RegistryConfigurationError without a problem") }
    } catch {
        fatalError("RegistryConfiguration.parse threw an untyped error: \(error)")
    }
    return 0
}
