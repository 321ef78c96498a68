//! `--metrics-listen ADDR` and `--stats` of `kring perf produce|consume` and
//! `kring consume`: kring's metrics (see `kring::metrics`) recorded by the Prometheus
//! exporter's recorder, served as Prometheus text on `http://ADDR/metrics` while the
//! command runs, and/or printed on stderr when it ends. Without either option no recorder
//! is installed and the metrics cost nothing.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::CliError;

/// Latency buckets (seconds) of the request and delivery histograms, 100 µs to 10 s.
const BUCKETS: &[f64] = &[
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
    10.0,
];

/// The options.
#[derive(Debug, Clone, clap::Args)]
pub struct MetricsArgs {
    /// Serve kring's metrics (Prometheus text) on http://ADDR/metrics while running,
    /// e.g. 127.0.0.1:9898 (port 0: any free port, announced on stderr)
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Print kring's metrics on stderr at the end (every kring_* series)
    #[arg(long)]
    pub stats: bool,
}

/// The recorder of a command run with either option.
pub struct MetricsView {
    handle: PrometheusHandle,
    stats: bool,
}

impl MetricsArgs {
    /// Installs the recorder (before any client is made, so every metric is registered
    /// with it) and starts serving; `None` when neither option was given.
    pub fn start(&self) -> Result<Option<MetricsView>, CliError> {
        if self.metrics_listen.is_none() && !self.stats {
            return Ok(None);
        }
        let handle = PrometheusBuilder::new()
            .set_buckets(BUCKETS)
            .and_then(PrometheusBuilder::install_recorder)
            .map_err(|e| CliError::Failed(format!("installing the metrics recorder: {e}")))?;
        if let Some(addr) = &self.metrics_listen {
            let listener = TcpListener::bind(addr)
                .map_err(|e| CliError::io(format!("listening on {addr} for metrics"), e))?;
            if let Ok(local) = listener.local_addr() {
                eprintln!("kring: metrics on http://{local}/metrics");
            }
            let served = handle.clone();
            std::thread::spawn(move || serve(listener, served));
        }
        let upkept = handle.clone();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_secs(5));
                upkept.run_upkeep();
            }
        });
        Ok(Some(MetricsView {
            handle,
            stats: self.stats,
        }))
    }
}

impl MetricsView {
    /// The command ended: with `--stats`, every kring series on stderr.
    pub fn finish(&self) {
        if !self.stats {
            return;
        }
        let rendered = self.handle.render();
        let mut err = std::io::stderr().lock();
        for line in rendered.lines().filter(|l| l.starts_with("kring_")) {
            let _ = writeln!(err, "{line}");
        }
    }
}

/// Answers every request on `listener` with the rendered metrics.
fn serve(listener: TcpListener, handle: PrometheusHandle) {
    for stream in listener.incoming().flatten() {
        let _ = answer(stream, &handle);
    }
}

fn answer(mut stream: TcpStream, handle: &PrometheusHandle) -> std::io::Result<()> {
    let mut request_line = String::new();
    BufReader::new(&stream).read_line(&mut request_line)?;
    let body = handle.render();
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}
