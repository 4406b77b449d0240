import Foundation
import GRDB
@testable import GRDBCipher

/// Every test target shares one support module (temporary directories,
/// child processes, oracles, polling); re-exported here so that each test
/// file sees it without importing it.
@_exported import TestSupport

/// Few PBKDF2 iterations: tests exercise the format, not the KDF's cost.
let fastIterations = 64
