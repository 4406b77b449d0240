import Metrics
import MetricsTestKit

/// The metrics system of the test process: bootstrapped once, shared by
/// every test (only the tests that look at a counter make it move).
let testMetrics: TestMetrics = {
    let metrics = TestMetrics()
    MetricsSystem.bootstrap(metrics)
    return metrics
}()

/// The total of counter `label` with `dimensions`, 0 before its first use.
func counterTotal(_ label: String, _ dimensions: [(String, String)]) -> Int64 {
    (try? testMetrics.expectCounter(label, dimensions))?.totalValue ?? 0
}
