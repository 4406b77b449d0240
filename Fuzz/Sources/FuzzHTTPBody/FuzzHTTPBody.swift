import Foundation
import GRDBRegistry
import TenantRequests

// The JSON bodies of every route of the sample server that decodes one
// (TenantRequests, the library the server decodes them with: POST /tenants,
// POST and PUT …/players, POST /fleet/tenants/{t}/move): every input decodes to a valid value or fails
// with a DecodingError (Hummingbird's 400), never a crash or another error.
// A decoded value re-encodes to JSON that decodes to the same value, and a
// decoded tenant id is a valid TenantID (it becomes a file name).

private func check<Body: Codable & Equatable>(_ bodyType: Body.Type, _ data: Data, _ validate: (Body) -> Void = { _ in }) {
    let body: Body
    do {
        body = try JSONDecoder().decode(Body.self, from: data)
    } catch is DecodingError {
        return
    } catch {
        fatalError("\(Body.self): decoding threw \(type(of: error)), not a DecodingError: \(error)")
    }
    validate(body)
    do {
        let again = try JSONDecoder().decode(Body.self, from: JSONEncoder().encode(body))
        if again != body { fatalError("\(Body.self): \(body) re-encoded decodes to \(again)") }
    } catch {
        fatalError("\(Body.self): \(body) does not survive a round trip: \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    check(NewTenant.self, data) { tenant in
        do {
            _ = try TenantID(tenant.id)
        } catch {
            fatalError("NewTenant decoded with an invalid id \(tenant.id.debugDescription): \(error)")
        }
    }
    check(NewPlayer.self, data)
    check(PlayerUpdate.self, data)
    check(MoveRequest.self, data)
    // Names are bounded (TenantRequests.maxNameLength): a longer one never decodes.
    if let player = try? JSONDecoder().decode(NewPlayer.self, from: data), player.name.count > maxNameLength {
        fatalError("NewPlayer decoded with a name of \(player.name.count) characters")
    }
    return 0
}
