"""The web console in headless Chromium, against a running server with a seeded registry.

run-console-tests.sh starts two servers: "FCM" (an fcm-registry that judges tokens) and the
registry the console looks into, which relays to it. The seed below gives it a topic of 10,000
tokens, smaller topics, device groups, and messages with real delivery states. Each test drives
the console as an operator would and checks what it shows against what the API answers; after
each, the browser's console must hold no error. With CONSOLE_SCREENSHOTS set, each screen is also
saved at 1280x800 and 390x844, with the manifest the Swift suite checks for staleness.
"""

import hashlib
import json
import os
import socket
import sqlite3
import subprocess
import time
import urllib.parse

import pytest
import requests
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

URL = os.environ["CONSOLE_URL"]
KEY = os.environ["CONSOLE_KEY"]
UPSTREAM_URL = os.environ["UPSTREAM_URL"]
UPSTREAM_KEY = os.environ["UPSTREAM_KEY"]
SCREENSHOTS = os.environ.get("CONSOLE_SCREENSHOTS")
CONSOLE_SOURCES = os.path.join(os.path.dirname(__file__), "../../Sources/RegistryServer/Resources/console")
API = {"Authorization": f"key={KEY}"}
SIZES = [(1280, 800), (390, 844)]


def token(label, n):
    return f"{label}{n:05d}:APA91b" + "c" * 40


def ok(reply):
    assert reply.status_code == 200, (reply.status_code, reply.text)
    return reply.json()


def api(method, path, **arguments):
    return ok(requests.request(method, URL + path, headers=API, timeout=30, **arguments))


def subscribe(topic, tokens, base=URL, headers=API):
    for start in range(0, len(tokens), 1000):
        ok(requests.post(f"{base}/iid/v1:batchAdd", headers=headers, timeout=30,
                         json={"to": f"/topics/{topic}", "registration_tokens": tokens[start:start + 1000]}))


@pytest.fixture(scope="session")
def seeded():
    """The registry an operator would look at: topics of several sizes, groups, relayed messages."""
    news = [token("news", n) for n in range(10_000)]
    subscribe("news", news)
    subscribe("sports", news[:3_000])
    subscribe("weather", news[5_000:5_600])
    subscribe("alerts-eu", news[:120])
    subscribe("alerts-us", news[200:290])
    # What the first token says of its device, as its app server told it: the token screen shows it.
    ok(requests.put(f"{URL}/api/tokens/{urllib.parse.quote(news[0], safe='')}", headers=API, timeout=30,
                    json={"platform": "android", "locale": "en-GB", "timeZone": "Europe/London", "appVersion": "5.12.0"}))
    for name, members in [("family-ada", news[:4]), ("family-grace", news[10:13]), ("team blue", news[20:32])]:
        ok(requests.post(f"{URL}/fcm/notification", headers={**API, "project_id": "123456789012"}, timeout=30,
                         json={"operation": "create", "notification_key_name": name, "registration_ids": members}))
    # "FCM" knows every token but one: a send to the four of them is three deliveries and one failure.
    known = news[:3]
    unknown = token("gone", 1)
    subscribe("devices", known + news[5_000:5_600], base=UPSTREAM_URL, headers={"Authorization": f"key={UPSTREAM_KEY}"})
    ok(requests.put(f"{URL}/api/tokens/{urllib.parse.quote(unknown, safe='')}", headers=API, timeout=30))
    direct = ok(requests.post(f"{URL}/fcm/send", headers=API, timeout=30, json={
        "registration_ids": known + [unknown], "notification": {"title": "Build 42", "body": "is live"}}))
    assert direct["success"] == 3 and direct["failure"] == 1, direct
    topic = ok(requests.post(f"{URL}/fcm/send", headers=API, timeout=30, json={
        "to": "/topics/weather", "data": {"forecast": "rain"}}))
    # The topic send is delivered in the background: wait until nothing is pending.
    deadline = time.monotonic() + 60
    while True:
        relay = api("GET", "/api/relay")["projects"][0]
        if relay["pending"] == 0 and relay["inFlight"] == 0:
            break
        assert time.monotonic() < deadline, relay
        time.sleep(0.2)
    messages = api("GET", "/api/messages")["messages"]
    direct_id = next(m["id"] for m in messages if m["target"].startswith("registration_ids"))
    return {"news": news, "direct": direct_id, "topic": str(topic["message_id"]), "unknown": unknown}


@pytest.fixture(scope="session")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,800", "--hide-scrollbars", "--lang=en-GB"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture
def console(browser, seeded):
    """The browser, signed in, at a given screen; afterwards its console must hold no error."""
    def at(route, width=1280, height=800):
        resize(browser, width, height)
        if not browser.current_url.startswith(URL + "/console"):
            browser.get(URL + "/console")
        browser.execute_script("location.hash = arguments[0]", route)
        return browser
    browser.get(URL + "/console")
    browser.execute_script("sessionStorage.setItem('fcm-registry.serverKey', arguments[0])", KEY)
    browser.get(URL + "/console#/overview")
    browser.refresh()  # a tab that signed in before: it goes on with the key in its session storage
    heading(browser, "Project console-app")
    yield at
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == [], errors


def resize(driver, width, height):
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


def wait(driver, seconds=15):
    """Waits out re-rendering too: an element found and then replaced is looked for again."""
    return WebDriverWait(driver, seconds, ignored_exceptions=[StaleElementReferenceException])


def heading(driver, text):
    """Waits for the screen titled `text`, and for its calls to the API to be answered."""
    def shown(d):
        titles = d.find_elements(By.TAG_NAME, "h1")
        return titles and titles[0].text == text and d.execute_script(
            "return document.documentElement.dataset.pending") in (None, "0")
    wait(driver).until(shown)


# MARK: - Tests


def test_sign_in(browser, seeded):
    browser.get(URL + "/console")
    browser.execute_script("sessionStorage.clear()")
    browser.get(URL + "/console#/overview")
    field = wait(browser).until(EC.visibility_of_element_located((By.ID, "server-key")))
    assert browser.find_element(By.CSS_SELECTOR, "label[for='server-key']").text == "Server key"
    field.send_keys(KEY, Keys.ENTER)
    heading(browser, "Project console-app")
    assert browser.find_element(By.ID, "nav").is_displayed()
    assert "console-app" in browser.find_element(By.ID, "project").text
    # The seeded project relays: the header says its messages reach devices.
    assert browser.find_element(By.CSS_SELECTOR, "#project .delivery").text == "delivering"
    # The key stays in this tab's session storage, nowhere else.
    assert browser.execute_script("return sessionStorage.getItem('fcm-registry.serverKey')") == KEY
    assert browser.execute_script("return localStorage.length") == 0
    assert browser.get_cookies() == []
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_condition_caret_then_count(console):
    driver = console("#/conditions")
    heading(driver, "Conditions")
    field = wait(driver).until(EC.element_to_be_clickable((By.ID, "condition")))
    field.clear()
    field.send_keys("'news' in topics && ('sports' in topics ||")
    wait(driver).until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#condition-diagnostic pre.diagnostic.error"), "^"))
    assert "condition:1:" in driver.find_element(By.CSS_SELECTOR, "#condition-diagnostic pre.diagnostic.error").text
    assert field.get_attribute("aria-invalid") == "true"
    field.send_keys(" 'weather' in topics)")
    count = wait(driver).until(EC.visibility_of_element_located((By.ID, "condition-count")))
    condition = "'news' in topics && ('sports' in topics || 'weather' in topics)"
    resolved = api("POST", "/api/audiences:resolve", json={"condition": condition, "dialect": "v1", "countOnly": True})
    assert count.get_attribute("data-count") == str(resolved["count"]) == "3600"
    assert field.get_attribute("aria-invalid") == "false"
    terms = driver.find_element(By.ID, "condition-reach").text
    assert "sports" in terms and "3,000" in terms and "10,000" in terms
    # Legacy HTTP and XMPP allow no parentheses' !: the dialect switch checks again.
    field.send_keys(Keys.END, " && !('alerts-eu' in topics)")
    wait(driver).until(EC.text_to_be_present_in_element((By.ID, "condition-diagnostic"), "· 4 topics"))
    driver.find_element(By.CSS_SELECTOR, "#dialect option[value='xmpp']").click()
    # The check typing asked for may answer after the switch and draw the diagnostic again: the
    # text is read where it is found, each time it is looked for.
    wait(driver).until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#condition-diagnostic pre.diagnostic.error"), "^"))


def test_condition_narrowed_by_what_tokens_say(console):
    """The playground's where: the count, each topic's count and the tokens narrow as the API's do,
    and a value no token could say is refused in the server's words."""
    driver = console("#/conditions")
    heading(driver, "Conditions")
    field = wait(driver).until(EC.element_to_be_clickable((By.ID, "condition")))
    field.clear()
    field.send_keys("'news' in topics || 'weather' in topics")
    wait(driver).until(lambda d: d.find_element(By.ID, "condition-count").get_attribute("data-count") == "10000")
    driver.find_element(By.ID, "where-platform-android").click()
    driver.find_element(By.ID, "where-locale").send_keys("en")
    where = {"platform": ["android"], "locale": ["en"]}
    condition = "'news' in topics || 'weather' in topics"
    narrowed = api("POST", "/api/audiences:resolve", json={"condition": condition, "dialect": "v1", "where": where})
    assert narrowed["count"] >= 1 and narrowed["count"] < 10_000, narrowed
    wait(driver).until(lambda d: d.find_element(By.ID, "condition-count").get_attribute("data-count") == str(narrowed["count"]))
    assert shown_tokens(driver) == narrowed["tokens"]
    terms = driver.find_element(By.ID, "condition-reach").text
    assert "narrowed" in terms and f"{narrowed['topicCounts']['news']:,}" in terms, terms
    # No "Send to this condition" while narrowed: a send reaches the whole condition.
    assert not driver.find_elements(By.LINK_TEXT, "Send to this condition")
    driver.find_element(By.ID, "where-time-zone").send_keys("Mars/Olympus_Mons")
    refused = wait(driver).until(EC.visibility_of_element_located((By.ID, "where-refused")))
    answer = requests.post(f"{URL}/api/audiences:resolve", headers=API, timeout=30,
                           json={"condition": condition, "where": {**where, "timeZone": ["Mars/Olympus_Mons"]}})
    assert answer.status_code == 400 and answer.json()["error"]["message"] in refused.text, (refused.text, answer.text)
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert all("/api/audiences:resolve" in e["message"] and "400" in e["message"] for e in errors), errors


def test_page_a_topic_of_ten_thousand(console, seeded):
    driver = console("#/topics/news")
    heading(driver, "Topic news")
    count = wait(driver).until(EC.visibility_of_element_located((By.ID, "topic-count")))
    assert count.get_attribute("data-count") == "10000"
    wait(driver).until(EC.text_to_be_present_in_element((By.TAG_NAME, "caption"), "Subscribers 1–100 of 10,000"))
    first = api("GET", "/api/topics/news", params={"pageSize": 100})
    second = api("GET", "/api/topics/news", params={"pageSize": 100, "pageToken": first["nextPageToken"]})
    assert shown_tokens(driver) == [m["token"] for m in first["subscribers"]]
    next_button = driver.find_element(By.XPATH, "//button[text()='Next']")
    next_button.click()
    wait(driver).until(EC.text_to_be_present_in_element((By.TAG_NAME, "caption"), "Subscribers 101–200 of 10,000"))
    assert shown_tokens(driver) == [m["token"] for m in second["subscribers"]]
    driver.find_element(By.XPATH, "//button[text()='Previous']").click()
    wait(driver).until(EC.text_to_be_present_in_element((By.TAG_NAME, "caption"), "Subscribers 1–100 of 10,000"))
    # A thousand a page, to the last page.
    driver.find_element(By.CSS_SELECTOR, "#page-size option[value='1000']").click()
    wait(driver).until(EC.text_to_be_present_in_element((By.TAG_NAME, "caption"), "Subscribers 1–1,000 of 10,000"))
    for page in range(2, 11):
        driver.find_element(By.XPATH, "//button[text()='Next']").click()
        wait(driver).until(EC.text_to_be_present_in_element(
            (By.TAG_NAME, "caption"), f"Subscribers {(page - 1) * 1000 + 1:,}–{page * 1000:,} of 10,000"))
    assert not driver.find_element(By.XPATH, "//button[text()='Next']").is_enabled()
    assert shown_tokens(driver)[-1] == seeded["news"][-1]


def shown_tokens(driver):
    # Read in one go: a live screen may replace its rows between two reads of single cells.
    return driver.execute_script("return [...document.querySelectorAll('tbody td.token')].map(c => c.textContent)")


def test_message_delivery_counts(console, seeded):
    driver = console("#/messages")
    heading(driver, "Messages")
    link = wait(driver).until(EC.element_to_be_clickable((By.XPATH, "//tr[td[contains(., 'registration_ids')]]//a")))
    wait(driver).until(EC.text_to_be_present_in_element((By.XPATH, "//tr[td[contains(., 'registration_ids')]]"), "failed 1"))
    link.click()
    heading(driver, "Message")
    delivery = api("GET", f"/api/messages/{urllib.parse.quote(seeded['direct'], safe='')}")["delivery"]
    assert delivery == {"pending": 0, "delivered": 3, "failed": 1, "cancelled": 0}
    for state, value in delivery.items():
        if state == "cancelled":
            continue  # shown only once something was cancelled
        shown = wait(driver).until(EC.presence_of_element_located((By.CSS_SELECTOR, f"#delivery-summary dd[data-stat='{state}']")))
        assert shown.get_attribute("data-value") == str(value), state
    assert not driver.find_elements(By.CSS_SELECTOR, "#delivery-summary dd[data-stat='cancelled']")
    assert not driver.find_elements(By.ID, "cancel")  # nothing left to cancel
    # The failed recipient, with FCM's error.
    row = wait(driver).until(EC.visibility_of_element_located((By.XPATH, f"//tr[td[contains(., '{seeded['unknown']}')]]")))
    assert "UNREGISTERED" in row.text
    driver.find_element(By.CSS_SELECTOR, "button[data-state='delivered']").click()
    wait(driver).until(EC.text_to_be_present_in_element((By.TAG_NAME, "caption"), "Recipients delivered"))
    assert sorted(shown_tokens(driver)) == sorted(seeded["news"][:3])


def test_lists_search_and_sort(console):
    driver = console("#/topics")
    heading(driver, "Topics")
    wait(driver).until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "tbody tr:first-child"), "news"))
    names = lambda: [row.find_element(By.CSS_SELECTOR, "td a").text for row in driver.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert names()[:3] == ["news", "sports", "weather"]  # by subscribers, largest first
    driver.find_element(By.XPATH, "//th/button[text()='Name']").click()
    wait(driver).until(lambda d: names()[:2] == ["alerts-eu", "alerts-us"])
    driver.find_element(By.ID, "topic-prefix").send_keys("alerts-")
    wait(driver).until(lambda d: names() == ["alerts-eu", "alerts-us"])
    driver = console("#/groups")
    heading(driver, "Device groups")
    driver.find_element(By.ID, "group-prefix").send_keys("family")
    wait(driver).until(lambda d: names() == ["family-ada", "family-grace"])
    driver.find_element(By.XPATH, "//a[text()='family-ada']").click()
    heading(driver, "Group family-ada")
    key = wait(driver).until(EC.visibility_of_element_located((By.CSS_SELECTOR, "#notification-key code")))
    assert key.text.startswith("APA91")
    # A name with a space, searched and looked up with it (%20 in the query, never "+").
    driver = console("#/groups")
    heading(driver, "Device groups")
    search = driver.find_element(By.ID, "group-prefix")
    search.clear()
    search.send_keys("team ")
    wait(driver).until(lambda d: names() == ["team blue"])
    driver.find_element(By.XPATH, "//a[text()='team blue']").click()
    heading(driver, "Group team blue")
    key = wait(driver).until(EC.visibility_of_element_located((By.CSS_SELECTOR, "#notification-key code")))
    assert key.text.startswith("APA91")
    assert driver.find_element(By.ID, "group-count").text == "12"


def test_token_screen(console, seeded):
    member = seeded["news"][0]
    driver = console("#/tokens/" + urllib.parse.quote(member, safe=""))
    wait(driver).until(EC.visibility_of_element_located((By.ID, "token-state")))
    page = driver.find_element(By.TAG_NAME, "main").text
    for topic in ["news", "sports", "alerts-eu"]:
        assert topic in page
    assert "family-ada" in page
    wait(driver).until(EC.text_to_be_present_in_element((By.TAG_NAME, "main"), "registration_ids (4)"))
    # Tokens are browsed, not only looked up: by prefix, a page at a time.
    driver = console("#/tokens")
    heading(driver, "Tokens")
    driver.find_element(By.ID, "token-prefix").send_keys("news0000")
    wait(driver).until(lambda d: shown_tokens(d) == seeded["news"][:10])


def test_a_token_says_what_device_it_is_and_an_operator_edits_it(console):
    """The token screen and the listing show what a token says of its device, when it was last
    seen and whether that is fresh; the form sends only what changed, an emptied field as null, and
    a value the server refuses is shown by its field in the server's words, changing nothing."""
    device, quiet = token("device", 1), token("device", 2)
    api("PUT", f"/api/tokens/{device}",
        json={"platform": "ios", "locale": "fr_CA", "timeZone": "America/Toronto", "appVersion": "5.12.0"})
    forty_days_ago = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 40 * 86_400))
    api("PUT", f"/api/tokens/{quiet}", json={"lastSeenAt": forty_days_ago})
    driver = console("#/tokens/" + urllib.parse.quote(device, safe=""))
    wait(driver).until(EC.visibility_of_element_located((By.ID, "token-state")))
    shown = lambda name: driver.find_element(By.ID, f"token-{name}-shown").text
    assert [shown("platform"), shown("locale"), shown("time-zone"), shown("app-version")] == [
        "ios", "fr-CA", "America/Toronto", "5.12.0"]
    last_seen = driver.find_element(By.ID, "token-last-seen")
    assert last_seen.text.endswith("fresh") and time.strftime("%Y") in last_seen.text, last_seen.text
    # The form holds the values; changing the time zone and emptying the locale sends just those two.
    assert driver.find_element(By.ID, "token-platform").get_attribute("value") == "ios"
    before = api("GET", f"/api/tokens/{device}")
    replace_field(driver.find_element(By.ID, "token-time-zone"), "Europe/Paris")
    replace_field(driver.find_element(By.ID, "token-locale"), "")
    driver.find_element(By.CSS_SELECTOR, "#device-form button[type='submit']").click()
    wait(driver).until(EC.text_to_be_present_in_element((By.CLASS_NAME, "outcome"), "Saved the token's locale, time zone."))
    wait(driver).until(lambda d: d.find_element(By.ID, "token-time-zone-shown").text == "Europe/Paris")
    assert not driver.find_elements(By.ID, "token-locale-shown")
    after = api("GET", f"/api/tokens/{device}")
    assert after["timeZone"] == "Europe/Paris" and "locale" not in after, after
    assert (after["platform"], after["appVersion"]) == ("ios", "5.12.0")
    # An operator's edit is no sign the app checked in: the last-seen time stays.
    assert after["lastSeenAt"] == before["lastSeenAt"], (before, after)
    # A time zone the server does not know: refused by its field, in the server's words, and nothing changes.
    replace_field(driver.find_element(By.ID, "token-time-zone"), "Mars/Olympus_Mons")
    driver.find_element(By.CSS_SELECTOR, "#device-form button[type='submit']").click()
    error = wait(driver).until(EC.visibility_of_element_located((By.ID, "token-time-zone-error")))
    refused = requests.put(f"{URL}/api/tokens/{device}", headers=API, timeout=30, json={"timeZone": "Mars/Olympus_Mons"})
    assert refused.status_code == 400 and error.text == refused.json()["error"]["message"], (error.text, refused.text)
    assert error.text.startswith("timeZone")
    assert driver.find_element(By.ID, "token-time-zone").get_attribute("aria-invalid") == "true"
    assert api("GET", f"/api/tokens/{device}")["timeZone"] == "Europe/Paris"
    refused = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert all("/api/tokens/device00001" in e["message"] and "400" in e["message"] for e in refused), refused
    # A token unheard of for 40 days is stale, and one that never said its device shows no such facts.
    driver = console("#/tokens/" + urllib.parse.quote(quiet, safe=""))
    wait(driver).until(lambda d: d.find_element(By.ID, "token-last-seen").text.endswith("stale"))
    assert not driver.find_elements(By.CSS_SELECTOR, "[id$='-shown']")
    # The listing shows them too.
    driver = console("#/tokens")
    heading(driver, "Tokens")
    driver.find_element(By.ID, "token-prefix").send_keys("device")
    wait(driver).until(lambda d: shown_tokens(d) == [device, quiet])
    rows = [row.text for row in driver.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert "ios" in rows[0] and "Europe/Paris" in rows[0] and rows[0].endswith("fresh"), rows
    assert rows[1].endswith("stale") and "ios" not in rows[1], rows


def test_relay_screen(console):
    driver = console("#/relay")
    heading(driver, "Relay")
    delivered = wait(driver).until(EC.presence_of_element_located((By.CSS_SELECTOR, "dd[data-stat='delivered']")))
    relay = api("GET", "/api/relay")["projects"][0]
    assert delivered.get_attribute("data-value") == str(relay["delivered"])
    assert driver.find_element(By.CSS_SELECTOR, "dd[data-stat='pruned']").get_attribute("data-value") == str(relay["pruned"]) == "1"


SCREENS = [
    ("overview", "#/overview", "Project console-app"),
    ("conditions", "#/conditions", "Conditions"),
    ("topics", "#/topics", "Topics"),
    ("topic", "#/topics/news", "Topic news"),
    ("groups", "#/groups", "Device groups"),
    ("group", "#/groups/team%20blue", "Group team blue"),
    ("token", None, "Token"),
    ("messages", "#/messages", "Messages"),
    ("message", None, "Message"),
    ("relay", "#/relay", "Relay"),
    ("webhooks", "#/relay/webhooks", "Relay"),
    ("webhook-secret", "#/relay/webhooks", "Relay"),
    ("compose", "#/compose/topic/weather", "Send a message"),
    ("audit", "#/audit", "Audit log"),
]


@pytest.mark.parametrize("width,height", SIZES)
def test_every_screen_fits_and_labels_its_controls(console, seeded, closed_url, width, height):
    """Each screen at both sizes: no sideways scrolling of the page, every control labelled, and
    (with CONSOLE_SCREENSHOTS) a screenshot."""
    # The Relay screen shows a webhook whose endpoint refuses connections: a backlog and a last error.
    failing_hook(closed_url, seeded)
    for name, route, title in SCREENS:
        if name == "token":
            route = "#/tokens/" + urllib.parse.quote(seeded["news"][0], safe="")
        if name == "message":
            route = "#/messages/" + urllib.parse.quote(seeded["direct"], safe="")
        driver = console(route, width, height)
        heading(driver, title)
        wait(driver).until(lambda d: not d.find_elements(By.XPATH, "//*[text()='…']"))
        if name == "conditions":
            wait(driver).until(EC.visibility_of_element_located((By.ID, "condition-count")))
        if name == "compose":
            wait(driver).until(EC.visibility_of_element_located((By.ID, "audience-count")))
        if name.startswith("webhook"):
            wait(driver).until(EC.text_to_be_present_in_element((By.ID, "webhook-list"), "Last error"))
        if name == "webhook-secret":
            # The secret shown once, as rotating the failing hook's secret shows it.
            driver.find_element(By.CSS_SELECTOR, "#webhook-list button.rotate").click()
            wait(driver).until(EC.alert_is_present()).accept()
            wait(driver).until(EC.visibility_of_element_located((By.ID, "webhook-secret")))
        overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, (name, width, overflow)
        unlabelled = driver.execute_script("""
            return [...document.querySelectorAll('input, select, textarea')]
              .filter(c => c.type !== 'hidden' && c.labels.length === 0 && !c.getAttribute('aria-label')).map(c => c.outerHTML)""")
        assert unlabelled == [], (name, unlabelled)
        if SCREENSHOTS:
            # The webhooks are further down the Relay screen: those screenshots start at their heading.
            driver.execute_script("""
                const section = arguments[0] ? document.getElementById('webhooks') : null;
                if (section) section.scrollIntoView({block: 'start'}); else window.scrollTo(0, 0);
                document.activeElement.blur()""", name.startswith("webhook"))
            time.sleep(0.3)
            driver.save_screenshot(os.path.join(SCREENSHOTS, f"{name}-{width}x{height}.png"))
    if SCREENSHOTS and (width, height) == SIZES[-1]:
        write_manifest()


def test_keyboard_reaches_every_section(console):
    driver = console("#/overview")
    heading(driver, "Project console-app")
    # From the top of the page, as a keyboard user arrives: the skip link, then the sections.
    driver.execute_script("document.querySelector('a.skip').focus()")
    reached = []
    for _ in range(10):
        driver.switch_to.active_element.send_keys(Keys.TAB)
        reached.append(driver.switch_to.active_element.text)
    assert reached[:10] == ["fcm-registry", "Overview", "Conditions", "Topics", "Groups", "Tokens", "Messages", "Relay",
                            "Audit", "Send"], reached
    driver.switch_to.active_element.send_keys(Keys.TAB)
    assert driver.switch_to.active_element.text == "Sign out"
    # The skip link moves focus into the screen and leaves the route alone.
    driver.execute_script("document.querySelector('a.skip').focus()")
    driver.switch_to.active_element.send_keys(Keys.ENTER)
    assert driver.execute_script("return document.activeElement.id") == "main"
    assert driver.execute_script("return location.hash") == "#/overview"
    # And Enter follows the focused link.
    driver.execute_script("document.querySelector('#nav a[href=\"#/relay\"]').focus()")
    driver.switch_to.active_element.send_keys(Keys.ENTER)
    heading(driver, "Relay")


def write_manifest():
    """What ConsoleTests.screenshotsAreCurrent checks: the console's digest and the screenshots."""
    digest = hashlib.sha256()
    for name in sorted(os.listdir(CONSOLE_SOURCES)):
        data = open(os.path.join(CONSOLE_SOURCES, name), "rb").read()
        digest.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0")
        digest.update(data)
    shots = sorted(f for f in os.listdir(SCREENSHOTS) if f.endswith(".png"))
    with open(os.path.join(SCREENSHOTS, "screenshots.json"), "w") as manifest:
        json.dump({"sources": digest.hexdigest(), "screenshots": shots}, manifest, indent=2)
        manifest.write("\n")


# MARK: - Acting, live screens, history (the console as an operations tool)


def requests_to(driver, fragment):
    """The browser's calls whose URL holds `fragment`, since the page loaded."""
    return driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name).filter(n => n.includes(arguments[0]))", fragment)


def test_sign_in_page_shows_no_sections_and_headings_get_no_ring(browser, seeded):
    browser.get(URL + "/console")
    browser.execute_script("sessionStorage.clear()")
    browser.get(URL + "/console#/overview")
    browser.refresh()
    wait(browser).until(EC.visibility_of_element_located((By.ID, "server-key")))
    # `hidden` wins over the nav's flex layout: no section links before signing in.
    assert not browser.find_element(By.ID, "nav").is_displayed()
    browser.find_element(By.ID, "server-key").send_keys(KEY, Keys.ENTER)
    heading(browser, "Project console-app")
    # The heading is focused on arrival (for screen readers), without a ring that looks like a field.
    assert browser.execute_script("return document.activeElement.tagName") == "H1"
    assert browser.execute_script("return getComputedStyle(document.activeElement).outlineStyle") == "none"
    # The top topics are a chart of links, not a chart and the same list again.
    assert browser.find_elements(By.CSS_SELECTOR, "ol.ranking") == []
    assert browser.find_elements(By.CSS_SELECTOR, "svg.chart a[href='#/topics/news']")
    # At 390 px the header is two rows at most: the brand row and the sections.
    resize(browser, 390, 844)
    time.sleep(0.3)
    rows = browser.execute_script("""
        const tops = [...document.querySelectorAll('header.bar > *')].filter(e => e.offsetParent !== null)
          .map(e => { const r = e.getBoundingClientRect(); return Math.round((r.top + r.bottom) / 16); });
        return new Set(tops).size""")
    assert rows <= 2, rows
    resize(browser, 1280, 800)
    browser.find_element(By.ID, "sign-out").click()
    wait(browser).until(EC.visibility_of_element_located((By.ID, "server-key")))
    assert not browser.find_element(By.ID, "nav").is_displayed()


def test_overview_shows_the_latest_message_without_a_reload_and_rests_while_hidden(console):
    driver = console("#/overview")
    heading(driver, "Project console-app")
    ok(requests.post(f"{URL}/fcm/send", headers=API, timeout=30, json={
        "to": "/topics/alerts-us", "notification": {"title": "Live overview", "body": "arrives by itself"}}))
    # Within the Overview's refresh interval (5 s), with no reload and the heading still focused.
    wait(driver, 12).until(EC.text_to_be_present_in_element((By.ID, "latest-messages"), "Live overview"))
    assert driver.execute_script("return document.activeElement.tagName") == "H1"
    # A hidden tab asks nothing; shown again, it asks at once.
    driver.execute_script("""
        Object.defineProperty(document, 'visibilityState', {value: 'hidden', configurable: true});
        document.dispatchEvent(new Event('visibilitychange'));
        performance.clearResourceTimings();""")
    time.sleep(7)
    assert requests_to(driver, "/api/") == []
    driver.execute_script("""
        Object.defineProperty(document, 'visibilityState', {value: 'visible', configurable: true});
        document.dispatchEvent(new Event('visibilitychange'));""")
    wait(driver, 5).until(lambda d: requests_to(d, "/api/messages"))


def test_overview_shows_token_freshness_by_month_and_the_policy(console):
    driver = console("#/overview")
    heading(driver, "Project console-app")
    seen = requests.get(f"{URL}/api/tokens:freshness", headers=API, timeout=30).json()
    card = wait(driver).until(EC.visibility_of_element_located((By.ID, "token-freshness")))
    assert "Token freshness" in card.text
    for name in ["fresh", "stale", "expiring7d"]:
        value = card.find_element(By.CSS_SELECTOR, f"dd[data-stat='{name}']").get_attribute("data-value")
        assert int(value) == seen[name]
    # One bar a month, each labelled with its count for a screen reader, the last open-ended.
    bars = card.find_elements(By.CSS_SELECTOR, "svg a[aria-label]")
    labels = [bar.get_attribute("aria-label") for bar in bars]
    assert len(labels) == 13 and labels[0].startswith("0–1 months ago: ") and labels[-1].startswith("12+ months ago: ")
    assert [int(label.rsplit(": ", 1)[1].replace(",", "")) for label in labels] == seen["byMonth"]
    assert "Stale after 30 days" in card.find_element(By.ID, "token-policy").text


def test_message_list_counts_come_with_the_page(console, seeded):
    driver = console("#/messages")
    heading(driver, "Messages")
    driver.execute_script("performance.clearResourceTimings()")
    row = wait(driver).until(EC.visibility_of_element_located((By.XPATH, "//tr[td[contains(., 'registration_ids')]]")))
    assert "Build 42 — is live" in row.text
    assert "delivered 3" in row.text and "failed 1" in row.text
    time.sleep(6)  # a refresh: still one call a page, never one a message
    assert [url for url in requests_to(driver, "/api/messages/") if "deliveries" not in url] == []


def test_a_tokens_screen_says_what_became_of_each_message(console, seeded):
    driver = console("#/tokens/" + urllib.parse.quote(seeded["unknown"], safe=""))
    heading(driver, "Token")
    row = wait(driver).until(EC.visibility_of_element_located((By.XPATH, "//tr[td[contains(., 'registration_ids')]]")))
    assert "failed" in row.text and "UNREGISTERED" in row.text
    driver = console("#/tokens/" + urllib.parse.quote(seeded["news"][0], safe=""))
    heading(driver, "Token")
    row = wait(driver).until(EC.visibility_of_element_located((By.XPATH, "//tr[td[contains(., 'registration_ids')]]")))
    assert "delivered" in row.text


def test_a_composed_send_reaches_fcm_and_its_counts_fill_in(console, seeded):
    upstream = {"Authorization": f"key={UPSTREAM_KEY}"}
    driver = console("#/compose/topic/weather")
    heading(driver, "Send a message")
    audience = wait(driver).until(EC.visibility_of_element_located((By.ID, "audience-count")))
    assert audience.get_attribute("data-count") == "600"
    driver.find_element(By.ID, "title").send_keys("Composed")
    driver.find_element(By.ID, "body").send_keys("from the console")
    driver.find_element(By.ID, "data-key-0").send_keys("kind")
    driver.find_element(By.ID, "data-value-0").send_keys("test")
    driver.find_element(By.ID, "ttl").send_keys("600")
    # A dry run sends nothing.
    driver.find_element(By.ID, "dry-run").click()
    wait(driver).until(EC.text_to_be_present_in_element((By.ID, "compose-outcome"), "Nothing was sent"))
    driver.find_element(By.ID, "send").click()
    heading(driver, "Message")
    # The counts fill in without a reload, as "FCM" answers.
    wait(driver, 60).until(lambda d: d.find_element(By.CSS_SELECTOR, "#delivery-summary dd[data-stat='delivered']").get_attribute("data-value") == "600")
    assert "Composed — from the console" in driver.find_element(By.TAG_NAME, "main").text
    # "FCM" logged one v1 message per device, as the console composed it.
    received = [json.loads(m["payload"]) for m in ok(requests.get(
        f"{UPSTREAM_URL}/api/messages", headers=upstream, params={"pageSize": 1000}, timeout=30))["messages"]]
    composed = [m for m in received if m.get("notification", {}).get("title") == "Composed"]
    assert len(composed) == 600
    assert composed[0]["notification"] == {"title": "Composed", "body": "from the console"}
    assert composed[0]["data"] == {"kind": "test"}
    # A condition shows the playground's diagnostics before it is sent.
    driver = console("#/compose")
    heading(driver, "Send a message")
    driver.find_element(By.CSS_SELECTOR, "#target-kind option[value='condition']").click()
    field = driver.find_element(By.ID, "target-condition")
    field.send_keys("'news' in topics &&")
    wait(driver).until(EC.visibility_of_element_located((By.CSS_SELECTOR, "#audience pre.diagnostic.error")))
    field.send_keys(" 'sports' in topics")
    resolved = api("POST", "/api/audiences:resolve", json={"condition": "'news' in topics && 'sports' in topics", "countOnly": True})
    shown = wait(driver).until(EC.visibility_of_element_located((By.ID, "audience-count")))
    assert shown.get_attribute("data-count") == str(resolved["count"])


def test_a_subscription_made_in_the_console_shows_in_the_api(console, seeded):
    driver = console("#/topics/console-made")
    heading(driver, "Topic console-made")
    # A topic nobody is subscribed to yet opens with its form open and says how to begin.
    wait(driver).until(EC.text_to_be_present_in_element((By.TAG_NAME, "main"), "No token is subscribed to console-made yet"))
    assert driver.find_element(By.CSS_SELECTOR, "details.manage").get_attribute("open") is not None
    driver.find_element(By.ID, "topic-tokens").send_keys("\n".join(seeded["news"][40:43]))
    driver.find_element(By.ID, "subscribe").click()
    wait(driver).until(EC.text_to_be_present_in_element((By.CLASS_NAME, "outcome"), "Subscribed 3 of 3 tokens to console-made"))
    assert api("GET", "/api/topics/console-made")["subscriberCount"] == 3
    wait(driver).until(lambda d: d.find_element(By.ID, "topic-count").get_attribute("data-count") == "3")
    # A group member added, then removed.
    driver = console("#/groups/family-grace")
    heading(driver, "Group family-grace")
    wait(driver).until(EC.visibility_of_element_located((By.CSS_SELECTOR, "#notification-key code")))
    driver.find_element(By.ID, "group-tokens").send_keys(seeded["news"][60])
    driver.find_element(By.ID, "add-members").click()
    wait(driver).until(EC.text_to_be_present_in_element((By.CLASS_NAME, "outcome"), "Added 1 token"))
    assert api("GET", "/api/groups/family-grace")["memberCount"] == 4
    driver.find_element(By.CSS_SELECTOR, f"button[aria-label='Remove {seeded['news'][60]}']").click()
    wait(driver).until(EC.text_to_be_present_in_element((By.CLASS_NAME, "outcome"), "Removed the token"))
    assert api("GET", "/api/groups/family-grace")["memberCount"] == 3
    # Unregistering asks first, then says what it did.
    victim = seeded["news"][9_999]
    driver = console("#/tokens/" + urllib.parse.quote(victim, safe=""))
    heading(driver, "Token")
    wait(driver).until(EC.element_to_be_clickable((By.ID, "unregister"))).click()
    wait(driver).until(EC.alert_is_present()).dismiss()
    assert api("GET", f"/api/tokens/{victim}")["state"] == "registered"
    driver.find_element(By.ID, "unregister").click()
    wait(driver).until(EC.alert_is_present()).accept()
    wait(driver).until(EC.text_to_be_present_in_element((By.CLASS_NAME, "outcome"), "Unregistered the token"))
    assert api("GET", f"/api/tokens/{victim}")["state"] == "unregistered"
    driver.find_element(By.ID, "register").click()
    wait(driver).until(EC.text_to_be_present_in_element((By.CLASS_NAME, "outcome"), "Registered the token again"))


def test_the_chart_has_the_last_hour_after_a_restart(browser, seeded):
    """A second server on the same database, started now, stands for the first after a restart:
    its Overview draws the last hour from the store at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([os.environ["CONSOLE_BINARY"], "serve", "--db", os.environ["CONSOLE_DB"], "--port", str(port),
                               "--xmpp-port", "off", "--webhook-allow-private-networks"], stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(base + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.1)
        resize(browser, 1280, 800)
        browser.get(base + "/console")
        browser.execute_script("sessionStorage.setItem('fcm-registry.serverKey', arguments[0])", KEY)
        browser.get(base + "/console#/overview")
        browser.refresh()
        heading(browser, "Project console-app")
        chart = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#history svg.chart")))
        assert int(chart.get_attribute("data-nonzero")) > 0
        browser.find_element(By.CSS_SELECTOR, "button[data-window='1h']").click()
        wait(browser).until(lambda d: d.find_element(By.CSS_SELECTOR, "#history svg.chart").get_attribute("data-buckets") == "60")
        assert int(browser.find_element(By.CSS_SELECTOR, "#history svg.chart").get_attribute("data-nonzero")) > 0
        stats = ok(requests.get(base + "/api/stats", headers=API, params={"window": "1h"}, timeout=30))
        assert stats["totals"]["accepted"] >= 2 and stats["totals"]["delivered"] >= 3
        # Hovering reads a minute's values.
        webdriver.ActionChains(browser).move_to_element(browser.find_element(By.CSS_SELECTOR, "#history svg.chart")).perform()
        assert "Delivered" in browser.find_element(By.CSS_SELECTOR, "#history .readout").text
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    finally:
        server.terminate()
        server.wait(timeout=30)
        browser.get(URL + "/console")


# MARK: - Webhooks (on the Relay screen)


EVENTS = ["token.unregistered", "delivery.failed", "message.completed"]


@pytest.fixture(scope="session")
def closed_url():
    """A local URL where nothing listens: every attempt to deliver there fails, refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/fcm-events"


def webhooks():
    return api("GET", "/api/webhooks")["webhooks"]


def create_hook(url, events=EVENTS):
    reply = requests.post(URL + "/api/webhooks", headers=API, timeout=30, json={"url": url, "events": events})
    assert reply.status_code == 201, (reply.status_code, reply.text)
    return reply.json()


def failing_hook(url, seeded):
    """A webhook to `url` that was sent an event it could not deliver: a backlog and a last error."""
    hook = next((hook for hook in webhooks() if hook["url"] == url), None) or create_hook(url)
    if not hook.get("lastError"):
        # To one token "FCM" knows: the other tests' messages and counts stay as they were.
        ok(requests.post(f"{URL}/fcm/send", headers=API, timeout=30, json={
            "to": seeded["news"][0], "data": {"webhook": "test"}}))
    deadline = time.monotonic() + 30
    while True:
        hook = api("GET", f"/api/webhooks/{hook['id']}")
        if hook.get("lastError") and hook["backlog"] > 0:
            return hook
        assert time.monotonic() < deadline, hook
        time.sleep(0.2)


def disable_hook(hook_id, reason):
    """Writes what the registry writes when a webhook has failed for 3 days, which a test cannot wait out."""
    now = int(time.time() * 1000)
    values = {"now": now, "reason": reason, "since": now - 3 * 86_400_000, "hook": hook_id}
    db = os.environ["CONSOLE_DB"]
    if not db.startswith(("postgres://", "postgresql://")):
        connection = sqlite3.connect(db, timeout=30)
        with connection:
            connection.execute("UPDATE webhook SET disabledAt = :now, disabledReason = :reason, failingSince = :since "
                               "WHERE publicId = :hook", values)
        connection.close()
        return
    # registry-db.sh's URL: the schema is its search_path, which psql takes from PGOPTIONS.
    base, _, query = db.partition("?")
    schema = urllib.parse.parse_qs(query)["search_path"][0]
    sql = """UPDATE webhook SET "disabledAt" = :now, "disabledReason" = :'reason', "failingSince" = :since
             WHERE "publicId" = :'hook'"""
    subprocess.run(["psql", base, "-q", "-v", "ON_ERROR_STOP=1", *[f"-v{k}={v}" for k, v in values.items()]],
                   input=sql, text=True, check=True, env={**os.environ, "PGOPTIONS": f"-c search_path={schema}"})


def card(driver, hook_id):
    return wait(driver).until(EC.visibility_of_element_located((By.CSS_SELECTOR, f"article[data-hook='{hook_id}']")))


def test_adding_a_webhook_shows_its_secret_once(console, closed_url):
    for hook in webhooks():
        assert requests.delete(f"{URL}/api/webhooks/{hook['id']}", headers=API, timeout=30).status_code == 204
    driver = console("#/relay/webhooks")
    heading(driver, "Relay")
    # The route names the section: its heading has the focus. With no webhook, it says what they
    # are for, and the form is open.
    assert driver.execute_script("return document.activeElement.id") == "webhooks-heading"
    empty = wait(driver).until(EC.visibility_of_element_located((By.ID, "webhooks-empty")))
    assert "No webhook yet" in empty.text and "signed POST" in empty.text
    assert driver.find_element(By.ID, "add-webhook-form").get_attribute("open") is not None
    # The API's refusal is shown in the form, in its words.
    url = driver.find_element(By.ID, "webhook-url")
    url.send_keys("https://ops:hunter2@hooks.example.com/events")
    driver.find_element(By.ID, "add-webhook").click()
    wait(driver).until(EC.text_to_be_present_in_element(
        (By.CSS_SELECTOR, "#add-webhook-form [role='alert']"), "url must not carry a user or password"))
    assert webhooks() == []
    refused = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert all("/api/webhooks" in e["message"] and "400" in e["message"] for e in refused), refused
    # Added: the secret is shown once, with a copy button and the warning.
    url.clear()
    url.send_keys(closed_url)
    driver.find_element(By.ID, "webhook-event-delivery-failed").click()
    driver.find_element(By.ID, "add-webhook").click()
    secret = wait(driver).until(EC.visibility_of_element_located((By.ID, "webhook-secret"))).text
    assert secret.startswith("whsec_")
    panel = driver.find_element(By.ID, "webhook-secret-panel").text
    assert "will not be shown again" in panel and closed_url in panel
    [hook] = webhooks()
    assert hook["url"] == closed_url and hook["events"] == ["token.unregistered", "message.completed"]
    assert secret not in json.dumps(hook)
    card(driver, hook["id"])
    # Copy: to the clipboard when the browser allows it…
    driver.execute_cdp_cmd("Browser.grantPermissions", {
        "origin": URL, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    driver.find_element(By.ID, "copy-webhook-secret").click()
    wait(driver).until(EC.text_to_be_present_in_element((By.ID, "webhook-secret-copied"), "Copied"))
    pasted = driver.execute_async_script("navigator.clipboard.readText().then(arguments[0], e => arguments[0]('refused: ' + e))")
    assert pasted == secret
    # …else selected, for the keyboard's copy.
    driver.execute_script("navigator.clipboard.writeText = () => Promise.reject(new Error('denied'))")
    driver.find_element(By.ID, "copy-webhook-secret").click()
    wait(driver).until(EC.text_to_be_present_in_element((By.ID, "webhook-secret-copied"), "Selected"))
    assert driver.execute_script("return getSelection().toString()") == secret
    # Kept: it leaves the page, and nothing shows it again.
    driver.find_element(By.ID, "hide-webhook-secret").click()
    assert secret not in driver.page_source
    assert driver.execute_script("return document.activeElement.id") == "webhooks-heading"
    driver.refresh()
    heading(driver, "Relay")
    card(driver, hook["id"])
    assert secret not in driver.page_source


def test_a_webhooks_backlog_and_last_error_show_as_they_happen(console, seeded, closed_url):
    hook = create_hook(closed_url.replace("/fcm-events", "/live-events"))
    driver = console("#/relay/webhooks")
    heading(driver, "Relay")
    shown = card(driver, hook["id"])
    assert "no event sent yet" in shown.text
    hook = failing_hook(hook["url"], seeded)
    # Without a reload, within the screen's refresh: what the API says of it.
    def matches(d):
        now = api("GET", f"/api/webhooks/{hook['id']}")
        shown = card(d, hook["id"])
        backlog = shown.find_element(By.CSS_SELECTOR, "dd[data-stat='backlog']").get_attribute("data-value")
        errors = shown.find_elements(By.CSS_SELECTOR, "[data-field='lastError']")
        return backlog == str(now["backlog"]) and errors and errors[0].text == now["lastError"]
    wait(driver, 15).until(matches)
    shown = card(driver, hook["id"])
    assert int(shown.find_element(By.CSS_SELECTOR, "dd[data-stat='backlog']").get_attribute("data-value")) > 0
    assert shown.find_element(By.CSS_SELECTOR, ".badge[data-state='failing']").text.startswith("failing since")
    assert "Last attempt" in shown.text and "none yet" not in shown.text
    # The error's time, the next attempt, and "Retry now", which makes the waiting events due at once.
    assert shown.find_element(By.CSS_SELECTOR, "[data-field='lastErrorAt']").text.startswith("at ")
    assert "Next attempt" in shown.text
    before = api("GET", f"/api/webhooks/{hook['id']}")["lastErrorAt"]
    shown.find_element(By.CSS_SELECTOR, "button.retry").click()
    wait(driver).until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#webhooks .outcome"), "Retrying now"))
    wait(driver, 15).until(lambda d: api("GET", f"/api/webhooks/{hook['id']}")["lastErrorAt"] > before)


def test_rotating_and_deleting_a_webhook(console, closed_url):
    url = closed_url.replace("/fcm-events", "/rotated-events")
    created = create_hook(url, ["message.completed"])
    driver = console("#/relay/webhooks")
    heading(driver, "Relay")
    # Rotating asks first; dismissed, nothing changes.
    card(driver, created["id"]).find_element(By.CSS_SELECTOR, "button.rotate").click()
    alert = wait(driver).until(EC.alert_is_present())
    assert url in alert.text and "24 hours" in alert.text
    alert.dismiss()
    assert "previousSecretExpiresAt" not in api("GET", f"/api/webhooks/{created['id']}")
    assert not driver.find_elements(By.ID, "webhook-secret")
    # Accepted: the new secret, shown once, and the old one signs beside it for a day.
    card(driver, created["id"]).find_element(By.CSS_SELECTOR, "button.rotate").click()
    wait(driver).until(EC.alert_is_present()).accept()
    rotated = wait(driver).until(EC.visibility_of_element_located((By.ID, "webhook-secret"))).text
    assert rotated.startswith("whsec_") and rotated != created["secret"]
    panel = driver.find_element(By.ID, "webhook-secret-panel").text
    assert "new signing secret" in panel and "24 hours" in panel and "will not be shown again" in panel
    assert api("GET", f"/api/webhooks/{created['id']}")["previousSecretExpiresAt"]
    wait(driver).until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, f"article[data-hook='{created['id']}']"), "Previous secret"))
    # Deleting asks first, then says what it did; the hook leaves the API and the screen.
    card(driver, created["id"]).find_element(By.CSS_SELECTOR, "button.delete").click()
    alert = wait(driver).until(EC.alert_is_present())
    assert url in alert.text
    alert.dismiss()
    assert any(hook["id"] == created["id"] for hook in webhooks())
    card(driver, created["id"]).find_element(By.CSS_SELECTOR, "button.delete").click()
    wait(driver).until(EC.alert_is_present()).accept()
    wait(driver).until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#webhooks .outcome"), f"Deleted the webhook to {url}"))
    assert all(hook["id"] != created["id"] for hook in webhooks())
    wait(driver).until(lambda d: not d.find_elements(By.CSS_SELECTOR, f"article[data-hook='{created['id']}']"))
    # Its secret, shown just before, went with it.
    assert not driver.find_elements(By.ID, "webhook-secret")


def test_enabling_a_disabled_webhook(console, closed_url):
    url = closed_url.replace("/fcm-events", "/disabled-events")
    created = create_hook(url, ["delivery.failed"])
    disable_hook(created["id"], "every attempt failed since 2026-11-24T00:00:00.000Z (3 days); last error: connection refused")
    assert api("GET", f"/api/webhooks/{created['id']}")["disabled"]
    driver = console("#/relay/webhooks")
    heading(driver, "Relay")
    shown = card(driver, created["id"])
    assert shown.find_element(By.CSS_SELECTOR, ".badge[data-state='disabled']")
    assert "connection refused" in shown.find_element(By.CSS_SELECTOR, "[data-field='disabledReason']").text
    # Enabling asks first; dismissed, it stays disabled.
    shown.find_element(By.CSS_SELECTOR, "button.enable").click()
    alert = wait(driver).until(EC.alert_is_present())
    assert url in alert.text and "signing secret" in alert.text
    alert.dismiss()
    assert api("GET", f"/api/webhooks/{created['id']}")["disabled"]
    # Accepted: on again, with its id, and the card shows it working without the button.
    card(driver, created["id"]).find_element(By.CSS_SELECTOR, "button.enable").click()
    wait(driver).until(EC.alert_is_present()).accept()
    wait(driver).until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#webhooks .outcome"), f"Enabled the webhook to {url}"))
    now = api("GET", f"/api/webhooks/{created['id']}")
    assert not now["disabled"] and "disabledAt" not in now and "failingSince" not in now
    wait(driver).until(lambda d: not card(d, created["id"]).find_elements(By.CSS_SELECTOR, "button.enable"))
    assert not card(driver, created["id"]).find_elements(By.CSS_SELECTOR, ".badge[data-state='disabled']")
    assert requests.delete(f"{URL}/api/webhooks/{created['id']}", headers=API, timeout=30).status_code == 204


def test_a_fan_out_sent_by_mistake_is_cancelled_from_its_screen(console, seeded):
    """FCM keeps answering UNAVAILABLE for three devices, so a topic send to them waits for its
    retries; the message's screen cancels it, and nothing more of it is sent."""
    upstream = {"Authorization": f"key={UPSTREAM_KEY}"}
    waiting = seeded["news"][5_100:5_103]
    for device in waiting:
        ok(requests.put(f"{UPSTREAM_URL}/api/tokens/{urllib.parse.quote(device, safe='')}/fault", headers=upstream,
                        timeout=30, json={"error": "UNAVAILABLE", "retryAfter": "3600s"}))
    try:
        subscribe("by-mistake", waiting)
        sent = ok(requests.post(f"{URL}/fcm/send", headers=API, timeout=30, json={
            "to": "/topics/by-mistake", "notification": {"title": "Sent by mistake"}}))
        message_id = str(sent["message_id"])
        path = f"/api/messages/{urllib.parse.quote(message_id, safe='')}"
        # Every device tried once and waiting an hour for its retry.
        deadline = time.monotonic() + 30
        while True:
            pending = api("GET", f"{path}/deliveries", params={"state": "pending"})["deliveries"]
            if len(pending) == 3 and all(entry["attempts"] == 1 for entry in pending):
                break
            assert time.monotonic() < deadline, pending
            time.sleep(0.2)
        driver = console(f"#/messages/{urllib.parse.quote(message_id, safe='')}")
        heading(driver, "Message")
        button = wait(driver).until(EC.element_to_be_clickable((By.ID, "cancel")))
        button.click()
        alert = wait(driver).until(EC.alert_is_present())
        assert "never sent" in alert.text
        alert.accept()
        wait(driver).until(EC.text_to_be_present_in_element((By.ID, "cancel-delivery"), "Cancelled: 3 recipients"))
        shown = driver.find_element(By.CSS_SELECTOR, "#delivery-summary dd[data-stat='cancelled']")
        assert shown.get_attribute("data-value") == "3"
        wait(driver).until(EC.text_to_be_present_in_element((By.TAG_NAME, "caption"), "Recipients cancelled"))
        assert sorted(shown_tokens(driver)) == sorted(waiting)
        assert api("GET", path)["delivery"] == {"pending": 0, "delivered": 0, "failed": 0, "cancelled": 3}
        # A second cancel is refused: nothing is left to send.
        again = requests.post(f"{URL}{path}:cancel", headers=API, timeout=30)
        assert again.status_code == 409 and again.json()["error"]["code"] == "failed_precondition", again.text
    finally:
        for device in waiting:
            requests.delete(f"{UPSTREAM_URL}/api/tokens/{urllib.parse.quote(device, safe='')}/fault", headers=upstream,
                            timeout=30)


# MARK: - The composer's targets, pasted lists, the charts, the relay's state (issue 40)


def shared_db(sql_sqlite, sql_postgres, values):
    """Runs one statement on the registry's database, as disable_hook does: for what a test cannot wait out."""
    db = os.environ["CONSOLE_DB"]
    if not db.startswith(("postgres://", "postgresql://")):
        connection = sqlite3.connect(db, timeout=30)
        with connection:
            connection.execute(sql_sqlite, values)
        connection.close()
        return
    base, _, query = db.partition("?")
    schema = urllib.parse.parse_qs(query)["search_path"][0]
    subprocess.run(["psql", base, "-q", "-v", "ON_ERROR_STOP=1", *[f"-v{k}={v}" for k, v in values.items()]],
                   input=sql_postgres, text=True, check=True, env={**os.environ, "PGOPTIONS": f"-c search_path={schema}"})


def replace_field(field, text):
    """Types `text` over what a field holds, as a user selecting all and typing does (input events and all)."""
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.DELETE)
    if text:
        field.send_keys(text)


@pytest.fixture(scope="session")
def compose_audience(seeded):
    """Two devices "FCM" knows, as a topic and as a device group, so that a send to either is delivered."""
    devices = seeded["news"][:2]
    subscribe("compose-kinds", devices)
    groups = requests.get(f"{URL}/api/groups/compose-kinds", headers=API, timeout=30)
    if groups.status_code == 404:
        ok(requests.post(f"{URL}/fcm/notification", headers={**API, "project_id": "123456789012"}, timeout=30,
                         json={"operation": "create", "notification_key_name": "compose-kinds", "registration_ids": devices}))
    return devices


@pytest.mark.parametrize("kind", ["token", "topic", "condition", "group"])
def test_the_composer_sends_to_every_kind_of_target(console, compose_audience, kind):
    """Send reaches the server for each kind of target: the message is in the log and its screen opens
    (a condition once sent nothing: the hidden token field was required, and the form stopped in silence)."""
    target = {
        "token": compose_audience[1],
        "topic": "compose-kinds",
        "condition": "'compose-kinds' in topics && 'news' in topics",
        "group": "compose-kinds",
    }[kind]
    title = f"To a {kind} {time.time_ns()}"
    driver = console("#/compose")
    heading(driver, "Send a message")
    driver.find_element(By.CSS_SELECTOR, f"#target-kind option[value='{kind}']").click()
    field = driver.find_element(By.ID, "target-condition" if kind == "condition" else "target")
    assert field.is_displayed()
    replace_field(field, target)
    if kind != "token":
        wait(driver).until(lambda d: d.find_element(By.ID, "audience-count").get_attribute("data-count") == "2")
    replace_field(driver.find_element(By.ID, "title"), title)
    driver.find_element(By.ID, "send").click()
    heading(driver, "Message")
    assert title in driver.find_element(By.TAG_NAME, "main").text
    logged = [m for m in api("GET", "/api/messages", params={"pageSize": 20})["messages"] if title in m["payload"]]
    assert len(logged) == 1, logged
    payload = json.loads(logged[0]["payload"])
    name = {"token": "token", "topic": "topic", "condition": "condition", "group": "notification_key"}[kind]
    assert name in payload, payload
    if kind in ("token", "topic"):
        assert payload[name].endswith(target), payload
    if kind == "condition":
        assert "compose-kinds" in payload[name], payload
    assert driver.execute_script("return location.hash") == "#/messages/" + urllib.parse.quote(logged[0]["id"], safe="")


def test_the_composer_says_what_stops_a_send(console):
    driver = console("#/compose")
    heading(driver, "Send a message")
    driver.find_element(By.CSS_SELECTOR, "#target-kind option[value='condition']").click()
    replace_field(driver.find_element(By.ID, "target-condition"), "")
    driver.find_element(By.ID, "send").click()
    wait(driver).until(EC.text_to_be_present_in_element((By.ID, "compose-outcome"), "Name a target first."))
    assert driver.execute_script("return document.activeElement.id") == "target-condition"


def test_a_pasted_list_is_split_on_lines_and_commas_and_what_is_no_token_is_refused(console, seeded):
    news = seeded["news"]
    driver = console("#/topics/pasted-list")
    heading(driver, "Topic pasted-list")
    wait(driver).until(EC.text_to_be_present_in_element((By.TAG_NAME, "main"), "No token is subscribed to pasted-list yet"))
    pasted = f"{news[70]}\nnot a token\n{news[71]}, {news[72]}\r\n\nshort\nbad/token{'x' * 40}\n  {news[70]}  \n"
    driver.find_element(By.ID, "topic-tokens").send_keys(pasted)
    driver.find_element(By.ID, "subscribe").click()
    wait(driver).until(EC.text_to_be_present_in_element(
        (By.CLASS_NAME, "outcome"), "Subscribed 3 of 3 tokens to pasted-list; 3 entries refused as no registration token"))
    refused = driver.find_element(By.CSS_SELECTOR, ".outcome .refused")
    assert refused.get_attribute("data-refused") == "3"
    items = [item.text for item in refused.find_elements(By.TAG_NAME, "li")]
    assert items[0].startswith("not a token") and "space" in items[0], items
    assert items[1].startswith("short") and "too short" in items[1], items
    assert items[2].startswith("bad/token") and "characters" in items[2], items
    # Only the three tokens were sent: none of the words became a token.
    assert sorted(m["token"] for m in api("GET", "/api/topics/pasted-list")["subscribers"]) == sorted(news[70:73])
    for word in ["not", "a", "token", "short", "not a token"]:
        assert requests.get(f"{URL}/api/tokens/{urllib.parse.quote(word, safe='')}", headers=API, timeout=30).status_code in (400, 404)
    # What was refused stays in the field, to be fixed.
    assert driver.find_element(By.ID, "topic-tokens").get_attribute("value").split("\n")[0] == "not a token"
    # A group's members the same way; with nothing left to send, nothing is sent.
    driver = console("#/groups/family-grace")
    heading(driver, "Group family-grace")
    wait(driver).until(EC.visibility_of_element_located((By.CSS_SELECTOR, "#notification-key code")))
    driver.find_element(By.ID, "group-tokens").send_keys("not a token, either")
    driver.find_element(By.ID, "add-members").click()
    wait(driver).until(EC.text_to_be_present_in_element(
        (By.CSS_SELECTOR, ".outcome [role='alert']"), "Nothing sent: 2 entries refused as no registration token"))
    assert driver.find_element(By.CSS_SELECTOR, ".outcome .refused").get_attribute("data-refused") == "2"
    assert api("GET", "/api/groups/family-grace")["memberCount"] == 3


def add_to_stats(delivered):
    """Adds `delivered` deliveries to the project's counts of two minutes ago, as a large fan-out would."""
    minute = (int(time.time() * 1000) // 60_000 - 2) * 60_000
    values = {"minute": minute, "delivered": delivered, "project": "console-app"}
    shared_db(
        "INSERT INTO minuteStat (projectId, minute, delivered) SELECT id, :minute, :delivered FROM project "
        "WHERE projectId = :project ON CONFLICT (projectId, minute) DO UPDATE SET delivered = delivered + excluded.delivered",
        """INSERT INTO "minuteStat" ("projectId", minute, delivered) SELECT id, :minute, :delivered FROM project
           WHERE "projectId" = :'project' ON CONFLICT ("projectId", minute) DO UPDATE SET delivered = "minuteStat".delivered + excluded.delivered""",
        values)


@pytest.mark.parametrize("width,height", SIZES)
def test_the_history_charts_keep_their_labels_inside_and_every_count_readable(console, seeded, width, height):
    """Deliveries by the hundred thousand beside messages by the handful: each count keeps a scale of its
    own (none lies flat at zero), axis numbers stay short (100K), and no label is cut off."""
    if width == SIZES[0][0]:
        add_to_stats(150_000)
    driver = console("#/overview", width, height)
    heading(driver, "Project console-app")
    for window, buckets in [("24h", "96"), ("1h", "60")]:
        driver.find_element(By.CSS_SELECTOR, f"button[data-window='{window}']").click()
        wait(driver).until(lambda d: d.find_element(By.CSS_SELECTOR, "#history svg.chart").get_attribute("data-buckets") == buckets)
        totals = ok(requests.get(f"{URL}/api/stats", headers=API, params={"window": window}, timeout=30))["totals"]
        assert totals["delivered"] >= 150_000 and 0 < totals["accepted"] < 1000, totals
        report = driver.execute_script("""
            const out = {clipped: [], lines: {}, labels: []};
            // The history's charts, and the largest topics' beside them.
            for (const svg of document.querySelectorAll('main svg.chart')) {
              const box = svg.getBoundingClientRect();
              for (const text of svg.querySelectorAll('text')) {
                const r = text.getBoundingClientRect();
                out.labels.push(text.textContent);
                if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
                  out.clipped.push([text.textContent, r.left - box.left, box.right - r.right, r.top - box.top, box.bottom - r.bottom]);
              }
              const rows = [...svg.querySelectorAll('.grid line')].filter(l => l.getAttribute('y1') === l.getAttribute('y2'))
                .map(l => Number(l.getAttribute('y1')));
              const plot = Math.max(...rows) - Math.min(...rows);
              for (const line of svg.querySelectorAll('polyline.line')) {
                const ys = line.getAttribute('points').split(' ').map(p => Number(p.split(',')[1]));
                const name = [...line.classList].find(c => c !== 'line');
                out.lines[name] = (Math.max(...ys) - Math.min(...ys)) / plot;
              }
            }
            return out""")
        assert report["clipped"] == [], (window, width, report["clipped"])
        # Every count with something in the window rises at least a fifth of its chart's height.
        for name in ["accepted", "delivered", "failed"]:
            if totals[name]:
                assert report["lines"][name] >= 0.2, (window, width, name, report["lines"])
        # Short numbers: 150,000 deliveries read as 150K or 200K at the top of their axis, never cut to "00,000".
        assert any(label.endswith("K") for label in report["labels"]), report["labels"]
        assert not any(len(label) > 5 and label[0].isdigit() and "," in label for label in report["labels"]), report["labels"]


def test_the_relay_says_when_its_last_error_happened(console):
    driver = console("#/relay")
    heading(driver, "Relay")
    relay = api("GET", "/api/relay")["projects"][0]
    assert relay["lastError"] and relay["lastErrorAt"], relay
    shown = wait(driver).until(EC.presence_of_element_located((By.CSS_SELECTOR, "[data-field='relayLastErrorAt']")))
    assert driver.find_element(By.CSS_SELECTOR, "[data-field='relayLastError']").text == relay["lastError"]
    assert shown.get_attribute("datetime") == relay["lastErrorAt"]
    # "at 28 Nov 2026, 05:50:44", in the reader's time zone.
    assert shown.text.startswith("at ") and relay["lastErrorAt"][:4] in shown.text, shown.text


def offered(driver):
    """The controls the console offers that need a scope: those shown of every `data-needs`."""
    return driver.execute_script("""
        return [...document.querySelectorAll('[data-needs]')].filter(e => e.getClientRects().length > 0)
          .map(e => e.textContent.trim() || e.outerHTML.slice(0, 80))""")


def sign_in_with(browser, key, route):
    browser.get(URL + "/console")
    browser.execute_script("sessionStorage.clear()")
    browser.get(URL + "/console#/overview")
    field = wait(browser).until(EC.visibility_of_element_located((By.ID, "server-key")))
    field.send_keys(key, Keys.ENTER)
    heading(browser, "Project console-app")
    browser.execute_script("location.hash = arguments[0]", route)


def test_a_read_key_sees_no_action_buttons(browser, seeded, closed_url):
    """Signed in with a `read` key, the console reads everything and offers nothing the key would
    be refused: no send, subscribe, unregister, cancel or webhook button, no such form."""
    failing_hook(closed_url, seeded)
    reader = requests.post(URL + "/api/keys", headers=API, timeout=30, json={"name": "console reader", "scopes": ["read"]})
    assert reader.status_code == 201, reader.text
    try:
        sign_in_with(browser, reader.json()["key"], "#/overview")
        assert browser.execute_script("return document.documentElement.dataset.scopes") == "read"
        for route, title in [
            ("#/overview", "Project console-app"), ("#/messages", "Messages"), ("#/topics/news", "Topic news"),
            ("#/groups/team%20blue", "Group team blue"), ("#/relay/webhooks", "Relay"), ("#/audit", "Audit log"),
            ("#/tokens/" + urllib.parse.quote(seeded["news"][0], safe=""), "Token"),
            ("#/messages/" + urllib.parse.quote(seeded["direct"], safe=""), "Message"),
        ]:
            browser.execute_script("location.hash = arguments[0]", route)
            heading(browser, title)
            wait(browser).until(lambda d: not d.find_elements(By.XPATH, "//*[text()='…']"))
            assert offered(browser) == [], (route, offered(browser))
            assert browser.find_element(By.CSS_SELECTOR, "#nav a[href='#/audit']").is_displayed()
            assert not browser.find_element(By.CSS_SELECTOR, "#nav a[href='#/compose']").is_displayed()
        # The same screens with the admin key offer them again.
        sign_in_with(browser, KEY, "#/relay/webhooks")
        heading(browser, "Relay")
        wait(browser).until(lambda d: offered(d) != [])
        assert "Delete…" in offered(browser) and "Send" in offered(browser)
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    finally:
        requests.delete(f"{URL}/api/keys/{reader.json()['id']}", headers=API, timeout=30)


def test_the_audit_screen_lists_a_webhook_added_and_a_key_revoked(console, closed_url):
    hook = requests.post(URL + "/api/webhooks", headers={**API, "X-Registry-Client": "console"}, timeout=30,
                         json={"url": closed_url, "events": ["token.unregistered"]})
    assert hook.status_code == 201, hook.text
    made = requests.post(URL + "/api/keys", headers=API, timeout=30, json={"name": "to revoke", "scopes": ["send"]})
    assert made.status_code == 201, made.text
    assert requests.delete(f"{URL}/api/keys/{made.json()['id']}", headers=API, timeout=30).status_code == 204
    try:
        driver = console("#/audit")
        heading(driver, "Audit log")
        rows = lambda d: [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
                          for row in d.find_elements(By.CSS_SELECTOR, "main table tbody tr")]
        wait(driver).until(lambda d: len(rows(d)) >= 3)
        shown = rows(driver)
        assert shown[0][1:3] == ["key.revoked", made.json()["id"]], shown[0]
        assert shown[1][1] == "key.created" and shown[2][1:3] == ["webhook.created", hook.json()["id"]], shown[:3]
        assert shown[2][4] == "console" and shown[0][4] == "api", shown[:3]
        assert made.json()["key"] not in driver.find_element(By.TAG_NAME, "main").text
        assert hook.json()["secret"] not in driver.find_element(By.TAG_NAME, "main").text
        # Filtered by action.
        driver.find_element(By.CSS_SELECTOR, "#audit-action option[value='webhook.created']").click()
        wait(driver).until(lambda d: rows(d) and all(row[1] == "webhook.created" for row in rows(d)))
        assert rows(driver)[0][2] == hook.json()["id"]
    finally:
        requests.delete(f"{URL}/api/webhooks/{hook.json()['id']}", headers=API, timeout=30)


def relay_cli(*arguments):
    subprocess.run([os.environ["CONSOLE_BINARY"], "project", "relay", "--project-id", "console-app", *arguments,
                    "--db", os.environ["CONSOLE_DB"]], check=True, stdout=subprocess.DEVNULL)


def test_the_header_follows_the_relay_turned_off_and_on(console):
    """`project relay --off` while the console is open: the header's badge says so without a sign-in,
    as the Relay screen does, and again when delivery is back. (Turning the relay off resets its counts:
    this test comes last.)"""
    driver = console("#/messages")
    heading(driver, "Messages")
    badge = lambda d: d.find_element(By.CSS_SELECTOR, "#project .delivery").text
    assert badge(driver) == "delivering"
    driver.execute_script("window.sameTab = true")
    deadline = time.monotonic() + 60
    while True:
        relay = api("GET", "/api/relay")["projects"][0]
        if relay["pending"] == 0 and relay["inFlight"] == 0:
            break
        assert time.monotonic() < deadline, relay
        time.sleep(0.2)
    relay_cli("--off")
    try:
        wait(driver, 20).until(lambda d: badge(d) == "recording only")
        assert driver.execute_script("return window.sameTab") is True
        assert "fcm-registry project relay" in driver.find_element(By.CSS_SELECTOR, "#project .delivery").get_attribute("title")
        driver.execute_script("location.hash = '#/relay'")
        heading(driver, "Relay")
        wait(driver).until(EC.text_to_be_present_in_element((By.TAG_NAME, "main"), "This project does not relay"))
        assert badge(driver) == "recording only"
    finally:
        relay_cli("--service-account", os.environ["CONSOLE_SERVICE_ACCOUNT"], "--upstream", UPSTREAM_URL)
    wait(driver, 20).until(lambda d: badge(d) == "delivering")
    assert driver.execute_script("return window.sameTab") is True
