-- GET /tenants/{t}/leaderboard, tenants round-robin, each with its token.
package.path = os.getenv("WRK_SCRIPTS") .. "/?.lua;" .. package.path
local tenants = require("tenants")
local counter = 0
local threads = 0

function setup(thread)
    thread:set("offset", threads * 7919)
    threads = threads + 1
end

function request()
    counter = counter + 1
    local tenant = tenants[((offset or 0) + counter) % #tenants + 1]
    return wrk.format("GET", "/tenants/" .. tenant.id .. "/leaderboard", { ["Authorization"] = tenant.auth })
end

function done(summary, latency, requests)
    io.write(string.format("non-2xx or errors: %d\n", summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
