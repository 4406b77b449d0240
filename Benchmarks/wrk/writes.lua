-- POST /tenants/{t}/players, tenants round-robin, a new name each time.
package.path = os.getenv("WRK_SCRIPTS") .. "/?.lua;" .. package.path
local tenants = require("tenants")
local counter = 0
local threads = 0

function setup(thread)
    thread:set("thread_id", threads)
    threads = threads + 1
end

-- Seeded per run and thread: otherwise every run repeats the names of the
-- previous one, and a second run on the same tenants gets conflicts.
function init(args)
    math.randomseed(os.time() * 1000 + (thread_id or 0))
end

function request()
    counter = counter + 1
    local tenant = tenants[((thread_id or 0) * 7919 + counter) % #tenants + 1]
    local body = string.format('{"name":"w%d-%d-%d","score":%d}', thread_id or 0, counter, math.random(1, 1000000000), counter % 1000)
    return wrk.format("POST", "/tenants/" .. tenant.id .. "/players",
        { ["Authorization"] = tenant.auth, ["Content-Type"] = "application/json" }, body)
end

function done(summary, latency, requests)
    io.write(string.format("non-2xx or errors: %d\n", summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
