import GRDBMigrations
print("hi")
