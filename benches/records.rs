//! Record batch benches (placeholder while `src/record` is being written).

fn main() {}
