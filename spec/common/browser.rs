//! A real browser for the page's specs: Debian's chromium driven through
//! chromedriver on a loopback port (fantoccini), one headless session, with
//! the few waits and looks the specs need, and screenshots.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{elements::Element, Client, ClientBuilder, Locator};
use serde_json::{json, Value};

/// chromedriver on a loopback port and one headless chromium session.
pub struct Browser {
    pub runtime: tokio::runtime::Runtime,
    client: Option<Client>,
    driver: Child,
}

impl Browser {
    /// The browser, or why there is none here.
    pub fn start() -> Result<Browser, String> {
        let chromium = ["chromium", "chromium-browser", "google-chrome"]
            .iter()
            .find_map(|name| which(name))
            .ok_or("no chromium on PATH (apt-get install chromium chromium-driver)")?;
        let driver_bin = which("chromedriver")
            .ok_or("no chromedriver on PATH (apt-get install chromium-driver)")?;
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(driver_bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("chromedriver did not start: {e}"))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut browser = Browser {
            runtime,
            client: None,
            driver,
        };
        let caps = json!({"goog:chromeOptions": {
            "binary": chromium.display().to_string(),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900", "--no-first-run", "--disable-extensions"]}});
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let client = browser.runtime.block_on(async {
            loop {
                let connector = hyper_util::client::legacy::connect::HttpConnector::new();
                match ClientBuilder::new(connector)
                    .capabilities(caps.clone())
                    .connect(&url)
                    .await
                {
                    Ok(client) => return Ok(client),
                    Err(e) if started.elapsed() > Duration::from_secs(30) => {
                        return Err(format!("chromium did not start: {e}"))
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        })?;
        browser.client = Some(client);
        Ok(browser)
    }

    pub fn c(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    pub fn goto(&self, url: &str) {
        self.runtime.block_on(self.c().goto(url)).unwrap();
    }

    /// The first element `css` finds, waiting up to 10 s for it.
    pub fn wait(&self, css: &str) -> Element {
        self.runtime
            .block_on(
                self.c()
                    .wait()
                    .at_most(Duration::from_secs(10))
                    .for_element(Locator::Css(css)),
            )
            .unwrap_or_else(|e| panic!("no {css} within 10 s: {e}; page: {}", self.text("body")))
    }

    /// Waits until the text of `css` contains `wanted`; answers that text.
    pub fn wait_text(&self, css: &str, wanted: &str) -> String {
        let started = Instant::now();
        loop {
            let text = self.text(css);
            if text.contains(wanted) {
                return text;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{css} never held {wanted:?}: {text:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The text of the first element `css` finds ("" when none).
    pub fn text(&self, css: &str) -> String {
        self.js(&format!(
            "const e = document.querySelector({}); return e ? e.innerText : ''",
            json!(css)
        ))
        .as_str()
        .unwrap_or("")
        .to_string()
    }

    pub fn click(&self, css: &str) {
        // A live update may redraw the view between finding and clicking: find again then.
        for _ in 0..20 {
            let element = self.wait(css);
            if self.runtime.block_on(element.click()).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("could not click {css}");
    }

    pub fn type_into(&self, css: &str, text: &str) {
        let element = self.wait(css);
        self.runtime.block_on(element.send_keys(text)).unwrap();
    }

    pub fn js(&self, script: &str) -> Value {
        self.runtime
            .block_on(self.c().execute(script, vec![]))
            .unwrap()
    }

    pub fn url(&self) -> String {
        self.runtime
            .block_on(self.c().current_url())
            .unwrap()
            .to_string()
    }

    pub fn title(&self) -> String {
        self.runtime.block_on(self.c().title()).unwrap()
    }

    pub fn accept_alert(&self) {
        let started = Instant::now();
        while self.runtime.block_on(self.c().accept_alert()).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no confirmation was asked"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// How many pixels the page is wider than a window of `width` shows
    /// (0: nothing to scroll sideways), the window given back its size after.
    pub fn overflow_at(&self, width: u32) -> i64 {
        self.runtime
            .block_on(self.c().set_window_size(width, 780))
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let overflow = self
            .js("return document.documentElement.scrollWidth - document.documentElement.clientWidth;")
            .as_i64()
            .unwrap();
        self.runtime
            .block_on(self.c().set_window_size(1280, 900))
            .unwrap();
        overflow
    }

    /// Saves a screenshot at `width` x `height` into `dir` (MIRAI_PAGE_SHOTS), when set.
    pub fn shot(&self, dir: &Option<PathBuf>, name: &str, width: u32, height: u32) {
        let Some(dir) = dir else { return };
        self.runtime
            .block_on(self.c().set_window_size(width, height))
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let png = self.runtime.block_on(self.c().screenshot()).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
        self.runtime
            .block_on(self.c().set_window_size(1280, 900))
            .unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = self.runtime.block_on(client.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(name))
        .find(|path| path.is_file())
}
