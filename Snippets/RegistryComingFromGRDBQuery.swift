// GRDBQuery's player list, ported to a daemon: the view becomes a
// service, `@Query` a `Query`, the environment a `DatabaseRegistry`, and
// the restricted writes go through `PlayerRepository` (GRDBRegistryExamples).

import GRDB
import GRDBRegistry
import GRDBRegistryExamples

// snippet.key
// EnvironmentKey + EnvironmentValues  ->  DatabaseKey + DatabaseRegistry
struct PlayersKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
}

extension DatabaseRegistry {
    var players: DatabaseContext {
        get { self[PlayersKey.self] }
        set { self[PlayersKey.self] = newValue }
    }
}
// snippet.end

// snippet.request
// The queryable is the same code as in GRDBQuery.
struct PlayersRequest: ValueObservationQueryable {
    enum Ordering: Sendable { case byScore, byName }

    static var defaultValue: [Player] { [] }
    var ordering: Ordering

    func fetch(_ db: Database) throws -> [Player] {
        switch ordering {
        case .byScore:
            try Player.order(Column("score").desc, Column("name")).fetchAll(db)
        case .byName:
            try Player.order(Column("name")).fetchAll(db)
        }
    }
}
// snippet.end

// snippet.service
// struct PlayerList: View  ->  a service, alive as long as the daemon needs it.
final class PlayerListService: Sendable {
    // @Query(PlayersRequest(ordering: .byScore)) var players: [Player]
    let players: Query<PlayersRequest>
    // @Environment(\.playerRepository): the permitted writes, injected at init.
    private let repository: PlayerRepository

    init(repository: PlayerRepository, registry: DatabaseRegistry = .current) {
        self.repository = repository
        self.players = Query(
            PlayersRequest(ordering: .byScore), in: \.players, registry: registry)
    }

    // ToggleOrderingButton(ordering: $players.ordering)
    func toggleOrdering() {
        let ordering = players.request.ordering
        players.request.ordering = ordering == .byScore ? .byName : .byScore
    }

    // Button("Delete") { try playerRepository.delete(...) }
    func delete(_ id: Int64) async throws {
        try await repository.delete(id)
    }

    // var body: some View { List(players) { ... } }: the list, on each change.
    func render(while condition: ([Player]) -> Bool) async throws {
        for try await players in players.updates {
            print(players.map(\.name))
            if !condition(players) { return }
        }
    }
}
// snippet.end

// snippet.app
// .databaseContext(.readOnly { repository.reader })  ->  a registry entry
let repository = try PlayerRepository.populated()
var registry = DatabaseRegistry()
registry.players = repository.context   // read-only, shares observations

let service = PlayerListService(repository: repository, registry: registry)
print(service.players.value.map(\.name))
// ["Barbara", "Craig", "Arthur", "David"]
service.toggleOrdering()
print(service.players.value.map(\.name))
// ["Arthur", "Barbara", "Craig", "David"]

if let id = service.players.value.first?.id {
    try await service.delete(id)                      // Arthur
}
try await service.render { $0.count == 4 }   // prints until Arthur is gone
// snippet.end
