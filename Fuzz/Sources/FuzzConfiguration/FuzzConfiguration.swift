import Foundation
import GRDBMigrations
import GRDBRegistryService

// Configuration files: the service's ServiceConfiguration and registryctl's
// RunnerConfiguration, from the same bytes. Either loads, or throws its
// typed error; nothing else (a crash, a hang, another error type) passes.
//
// Kept thin: when the configuration loaders change, only these two calls do.

private let directory: URL = {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("FuzzConfiguration-\(getpid())")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    let environment = ["GRDB_REGISTRY_KEY": "secret"]

    do {
        let configuration = try ServiceConfiguration.parse(data, baseDirectory: directory, environment: environment)
        // A loaded configuration can be checked against the machine.
        _ = configuration.problems(environment: environment)
    } catch is ServiceConfigurationError {
    } catch {
        fatalError("ServiceConfiguration.parse threw an untyped error: \(error)")
    }

    let file = directory.appendingPathComponent("registryctl.json")
    do {
        try data.write(to: file)
    } catch {
        fatalError("can't write the input: \(error)")
    }
    do {
        _ = try RunnerConfiguration.load(from: file)
    } catch is RunnerConfigurationError {
    } catch {
        fatalError("RunnerConfiguration.load threw an untyped error: \(error)")
    }
    return 0
}
