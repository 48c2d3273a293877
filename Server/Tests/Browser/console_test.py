"""Browser tests of sync-server's console (issue 19), in headless Chromium driven by Selenium.

Run by .ci/browser, which installs Debian's chromium and chromium-driver and Selenium from PyPI, and passes the
paths of the built `sync-server` and `todo`. Each test starts its own server on 127.0.0.1 (a fresh SQLite file)
and stops it by its PID; a `todo` device syncs the tutorial's items into it. What each test checks is in its
docstring. Screenshots of the two pages go to docs/ (console-overview.png, console-table.png).
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

SERVER = os.environ["SYNC_SERVER"]
TODO = os.environ["TODO_BIN"]
DOCS = os.environ.get("SCREENSHOTS", "")
WAIT = 15  # seconds any one thing may take to appear


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A sync-server on 127.0.0.1 with a fresh database, stopped by its PID."""

    def __init__(self, directory, *options):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(directory, f"server-{self.port}.log"), "w")
        database = "sqlite:" + os.path.join(directory, f"server-{self.port}.sqlite")
        self.process = subprocess.Popen(
            [SERVER, "--port", str(self.port), "--database", database, *options],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + WAIT
        while time.time() < deadline:
            try:
                urllib.request.urlopen(self.url + "/health", timeout=1)
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("sync-server did not start")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def api_error(self, filter_text):
        """The table API's error text for a $filter, as a v2 client gets it."""
        request = urllib.request.Request(
            self.url + "/tables/TodoItem?$filter=" + urllib.parse.quote(filter_text),
            headers={"ZUMO-API-VERSION": "2.0.0"})
        try:
            urllib.request.urlopen(request, timeout=5)
        except urllib.error.HTTPError as error:
            return json.loads(error.read())["error"]
        raise AssertionError("the API took the filter")


class Device:
    """The tutorial's `todo` with a store of its own."""

    def __init__(self, directory, server, token=None):
        self.environment = dict(os.environ, TODO_STORE=os.path.join(directory, f"device-{server.port}.sqlite"),
                                TODO_URL=server.url)
        if token:
            self.environment["TODO_TOKEN"] = token

    def run(self, *arguments):
        result = subprocess.run([TODO, *arguments], env=self.environment, capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise AssertionError(f"todo {' '.join(arguments)} failed: {result.stdout}{result.stderr}")
        return result.stdout

    def id_of(self, text):
        return next(item["id"] for item in json.loads(self.run("list", "--all", "--json")) if item["text"] == text)


def token(subject, secret, *roles):
    arguments = [SERVER, "token", "--sub", subject, "--secret", secret, "--ttl", "600"]
    for role in roles:
        arguments += ["--role", role]
    return subprocess.run(arguments, capture_output=True, text=True, check=True).stdout.strip()


class ConsoleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        options = webdriver.ChromeOptions()
        for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800"]:
            options.add_argument(argument)
        options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
        cls.browser = webdriver.Chrome(
            options=options, service=Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")))

    @classmethod
    def tearDownClass(cls):
        cls.browser.quit()

    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="console-browser-")
        self.servers = []

    def tearDown(self):
        for server in self.servers:
            server.stop()

    def start(self, *options):
        server = Server(self.directory, *options)
        self.servers.append(server)
        return server

    def wait(self, condition, message):
        return WebDriverWait(self.browser, WAIT).until(condition, message)

    def rows(self):
        """The texts of the table page's rows, and whether each is shown deleted: read in one script, so that a
        redraw between reading one row and the next cannot hand back a stale element (a CI run met that)."""
        return [tuple(row) for row in self.browser.execute_script(
            "return [...document.querySelectorAll('#rows tr.row')].map(row => "
            "[row.querySelector(\"td[data-column='text']\").textContent, row.classList.contains('deleted')])")]

    def wait_rows(self, expected, message):
        self.wait(lambda _: sorted(text for text, _ in self.rows()) == sorted(expected), message)

    def screenshot(self, name):
        if DOCS:
            self.browser.save_screenshot(os.path.join(DOCS, name))

    def test_tutorial_items_filter_deleted_rows_and_a_bad_filter(self):
        """The tutorial's three items, synced by a device, are on the overview (3 live rows) and the table's page;
        a $filter narrows them to the completed one; a deleted item shows only with "Show deleted rows", struck
        through; a bad filter shows the API's own error text; a row opens to its JSON; a column header sorts."""
        server = self.start()
        device = Device(self.directory, server)
        for text in ["Buy milk", "Walk the dog", "Call mom"]:
            device.run("add", text)
        device.run("complete", device.id_of("Walk the dog")[:8])
        device.run("sync")

        self.browser.get(server.url + "/console")
        live = self.wait(ec.visibility_of_element_located((By.CSS_SELECTOR, "tr[data-table='TodoItem'] td.live")),
                         "the overview lists no TodoItem")
        self.wait(lambda _: live.text == "3", "the overview does not count 3 live rows")
        self.assertEqual(self.browser.find_element(By.CSS_SELECTOR, "tr[data-table='TodoItem'] td.deleted").text, "0")
        self.assertIn("healthy", self.browser.find_element(By.ID, "health").text)
        # No auth, no sign-in: the form was shown once, its CSS display winning over the hidden attribute.
        self.assertFalse(self.browser.find_element(By.ID, "signin").is_displayed())
        self.screenshot("console-overview.png")

        self.browser.find_element(By.LINK_TEXT, "TodoItem").click()
        self.wait(ec.url_contains("/console/tables/TodoItem"), "the table's page did not open")
        self.wait_rows(["Buy milk", "Walk the dog", "Call mom"], "the table's page does not show the three items")

        search = self.browser.find_element(By.ID, "filter")
        search.send_keys("complete eq true", Keys.ENTER)
        self.wait_rows(["Walk the dog"], "the filter did not narrow the rows to the completed item")
        self.assertIn("filter=complete", self.browser.current_url)  # the view can be linked

        device.run("delete", device.id_of("Call mom")[:8])
        device.run("sync")
        search.clear()
        search.send_keys(Keys.ENTER)
        self.wait_rows(["Buy milk", "Walk the dog"], "the deleted item is still shown")
        self.browser.find_element(By.ID, "deleted").click()
        self.wait_rows(["Buy milk", "Walk the dog", "Call mom"], "Show deleted rows did not show the deleted item")
        self.assertIn(("Call mom", True), self.rows())
        self.assertIn(("Buy milk", False), self.rows())

        self.browser.find_element(By.CSS_SELECTOR, "th[data-column='text']").click()
        self.wait(lambda _: [text for text, _ in self.rows()] == ["Buy milk", "Call mom", "Walk the dog"],
                  "sorting by text did not order the rows")
        self.browser.find_element(By.CSS_SELECTOR, "#rows tr.row").click()
        details = self.wait(ec.visibility_of_element_located((By.CSS_SELECTOR, "#rows tr.json pre")),
                            "a row did not open to its JSON")
        item = json.loads(details.text)
        self.assertEqual(item["text"], "Buy milk")
        self.assertTrue({"id", "version", "updatedAt", "deleted"} <= item.keys())
        self.screenshot("console-table.png")

        bad = "text eq"
        search.send_keys(bad, Keys.ENTER)
        error = self.wait(ec.visibility_of_element_located((By.ID, "error")), "a bad filter showed no error")
        self.assertEqual(error.text, server.api_error(bad))

    def test_with_auth_only_an_administrators_token_opens_it_and_never_in_the_url(self):
        """With auth, the console asks for a token: a user's token is refused (403, said on the page), an
        administrator's (role admin) shows the tables, across users of the per-user TodoItem; the token is never
        in the page's URL."""
        secret = "console-browser-secret-0123456789abcdef"
        config = os.path.join(self.directory, "server.json")
        with open(config, "w") as file:
            json.dump({"auth": {"hs256Secret": secret}, "tables": [{"name": "TodoItem", "perUser": True}]}, file)
        server = self.start("--config", config)
        for user in ["alice", "bob"]:
            device = Device(os.path.join(self.directory), server, token(user, secret))
            device.environment["TODO_STORE"] = os.path.join(self.directory, f"{user}.sqlite")
            device.run("add", f"{user}'s item")
            device.run("sync")

        self.browser.get(server.url + "/console")
        self.wait(ec.visibility_of_element_located((By.ID, "signin")), "no sign-in form without a token")
        field = self.browser.find_element(By.ID, "token")
        user_token = token("alice", secret)
        field.send_keys(user_token, Keys.ENTER)
        message = self.wait(ec.visibility_of_element_located((By.ID, "message")), "no message for a user's token")
        self.wait(lambda _: "not an administrator" in message.text, "a user's token was not refused")

        admin_token = token("root", secret, "admin")
        field = self.wait(ec.visibility_of_element_located((By.ID, "token")), "no sign-in form after a refusal")
        field.send_keys(admin_token, Keys.ENTER)
        live = self.wait(ec.visibility_of_element_located((By.CSS_SELECTOR, "tr[data-table='TodoItem'] td.live")),
                         "an administrator's token did not open the console")
        self.wait(lambda _: live.text == "2", "the console does not count both users' rows")
        self.browser.find_element(By.LINK_TEXT, "TodoItem").click()
        self.wait_rows(["alice's item", "bob's item"], "the administrator does not see both users' rows")
        for secret_text in [user_token, admin_token]:
            self.assertNotIn(secret_text, self.browser.current_url)
        self.browser.find_element(By.ID, "signout").click()


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
