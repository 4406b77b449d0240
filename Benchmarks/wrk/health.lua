-- GET /health/live, built per request by a Lua request() function as
-- reads.lua builds its requests, so that the ceiling and the reads pay the
-- same load-generator cost (wrk's static request, without a script, costs
-- wrk less CPU on these shared cores, and would flatter the ceiling). No
-- Authorization header: the ceiling is HTTP alone.
local counter = 0

function request()
    counter = counter + 1
    return wrk.format("GET", "/health/live")
end

function done(summary, latency, requests)
    io.write(string.format("non-2xx or errors: %d\n", summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
