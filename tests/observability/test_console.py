"""``odradek console`` in a real browser: Debian's headless Chromium driven by Playwright.

The group page follows a rebalance without reloading, links lead from the groups list to a
group and on to a topic, every page renders without console errors, and the console shows
"disconnected" while its broker is down and recovers when it is back. Screenshots go to the
test's temp directory.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.coordinator_broker.members import Member
from tests.observability.console import ConsoleProcess
from tests.observability.support import QUICK_GROUPS

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--no-first-run"]
WAIT_MS = 15_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"the console tests need Debian's chromium at {CHROMIUM} "
                    "(scripts/check installs it: apt-get install chromium)", pytrace=False)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Page:
    """A browser page that records console errors and uncaught exceptions."""

    def __init__(self, browser: Browser, shots: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1100, "height": 800})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error"
                     else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.shots = shots
        shots.mkdir(exist_ok=True)

    def text_of(self, selector: str, expected: str | tuple[str, ...]) -> str:
        """Wait until ``selector``'s text is (one of) ``expected``; that text."""
        wanted = (expected,) if isinstance(expected, str) else expected
        self.page.wait_for_function(
            "([sel, wanted]) => { const e = document.querySelector(sel);"
            " return e !== null && wanted.includes(e.textContent.trim()); }",
            arg=[selector, list(wanted)], timeout=WAIT_MS)
        return str(self.page.text_content(selector)).strip()

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path))
        assert path.stat().st_size > 0
        return path


@pytest.fixture
def group_on_broker(make_broker: Callable[..., BrokerProcess]
                    ) -> Iterator[tuple[BrokerProcess, Member, ConsoleProcess]]:
    """A broker with topic t (2 partitions, 3 messages in t-0), group g Steady with one
    member that committed offset 1 of t-0, and a console on it."""
    broker = make_broker(settings=QUICK_GROUPS)
    with RawClient(broker.address) as client:
        client.create_topic("t", 2)
        client.produce("t", [b"a", b"b", b"c"], partition=0)
    with Member(broker.address, "g", ["t"]) as first:
        first.join()
        first.commit({("t", 0): 1})
        console = ConsoleProcess(broker.bootstrap)
        try:
            yield broker, first, console
        finally:
            console.stop()


def test_group_page_follows_a_rebalance_and_links_lead_on(
    browser: Browser, group_on_broker: tuple[BrokerProcess, Member, ConsoleProcess],
    tmp_path: Path,
) -> None:
    broker, first, console = group_on_broker
    page = Page(browser, tmp_path / "screenshots")
    page.page.goto(f"{console.url}/groups")
    page.text_of("#groups tbody tr td a", "g")
    page.shot("groups")
    page.page.click("#groups tbody tr td a")
    page.page.wait_for_url(f"{console.url}/groups/g", timeout=WAIT_MS)
    page.text_of("#state", "Steady")
    page.text_of("#member-count", "1")
    page.text_of("#lag", "2")
    assert page.page.locator("#lag-chart rect").count() == 2
    page.page.evaluate("window.notReloaded = true")
    page.shot("group-steady")

    with Member(broker.address, "g", ["t"]) as second:
        second.send_join()  # held until the first member rejoins: PrepareRebalance
        page.text_of("#state", ("PrepareRebalance", "Rebalancing"))
        page.shot("group-rebalancing")
        first.join()
        assert second.finish_join()["error_code"] == 0
        page.text_of("#state", "Steady")
        page.text_of("#member-count", "2")
        page.text_of("#generation", "2")
        assert page.page.locator("#members tbody tr").count() == 2
        timeline = str(page.page.text_content("#timeline"))
        assert "PrepareRebalance" in timeline and "Steady gen 2" in timeline
        assert page.page.evaluate("window.notReloaded") is True
        page.shot("group-two-members")

        page.page.click("#offsets tbody tr td a")  # the topic of the first partition
        page.page.wait_for_url(f"{console.url}/topics/t", timeout=WAIT_MS)
        page.text_of("#partitions tbody tr:first-child td:last-child", "3")  # t-0's latest
        assert page.page.locator("#partitions tbody tr").count() == 2
        page.shot("topic")

        page.page.click("header nav a[href='/']")
        page.text_of("#brokers tbody tr td", "0")
        page.shot("cluster")
    assert page.errors == []
    assert sorted(p.name for p in (tmp_path / "screenshots").iterdir()) == [
        "cluster.png", "group-rebalancing.png", "group-steady.png", "group-two-members.png",
        "groups.png", "topic.png"]


def test_console_shows_disconnected_and_recovers(
    browser: Browser, group_on_broker: tuple[BrokerProcess, Member, ConsoleProcess],
    tmp_path: Path,
) -> None:
    broker, _, console = group_on_broker
    page = Page(browser, tmp_path / "screenshots")
    page.page.goto(f"{console.url}/groups/g")
    page.text_of("#state", "Steady")
    page.text_of("#status", "connected")

    broker.stop()
    page.text_of("#status", "disconnected")
    page.shot("disconnected")
    broker.restart()
    page.text_of("#status", "connected")
    page.text_of("#state", "Steady")
    page.shot("recovered")
    # the failed requests are the page's own business: it says so in the status, not errors
    assert [e for e in page.errors if "503" not in e] == []
