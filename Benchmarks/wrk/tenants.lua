-- Shared by the read and write scripts: tenants and their tokens, one
-- "id token" line each, from the file named by $WRK_TENANTS.
local tenants = {}
for line in io.lines(os.getenv("WRK_TENANTS")) do
    local id, token = line:match("^(%S+) (%S+)$")
    if id then tenants[#tenants + 1] = { id = id, auth = "Bearer " .. token } end
end
return tenants
