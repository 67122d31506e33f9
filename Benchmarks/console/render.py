"""How long the console takes to show the first page of a 1,000,000-token topic after the API answers.

Starts a release server on a fresh database, subscribes 1,000,000 tokens to one topic through
batchAdd, then opens the topic's screen in headless Chromium at each page size and reads what the
console measured (`data-render-ms` on <main>: from the answer's arrival to the frame after the rows
are in the page), with the API's own time for the same page from the browser's resource timing.

    python3 render.py --binary ../../.build/release/fcm-registry [--tokens 1000000] [--runs 7]

Needs chromium, chromium-driver, and selenium and requests from PyPI.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time

import requests
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=7)
    arguments = parser.parse_args()
    work = tempfile.mkdtemp()
    db = os.path.join(work, "console.sqlite")
    project = json.loads(subprocess.check_output(
        [arguments.binary, "project", "create", "--db", db, "--project-id", "bench", "--sender-id", "100000000001"]))
    key = project["server_key"]
    port = free_port()
    server = subprocess.Popen([arguments.binary, "serve", "--db", db, "--port", str(port), "--xmpp-port", "off",
                               "--log-level", "warning"], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"key={key}"}
    try:
        for _ in range(100):
            try:
                requests.get(url + "/health", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        started = time.monotonic()
        session = requests.Session()
        for start in range(0, arguments.tokens, 1000):
            tokens = [f"bench{n:08d}:APA91b" + "b" * 40 for n in range(start, min(start + 1000, arguments.tokens))]
            reply = session.post(url + "/iid/v1:batchAdd", headers=headers, timeout=60,
                                 json={"to": "/topics/big", "registration_tokens": tokens})
            reply.raise_for_status()
        print(f"seeded {arguments.tokens:,} subscribers in {time.monotonic() - started:.1f} s")

        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,800"]:
            options.add_argument(argument)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            driver.get(url + "/console")
            driver.execute_script("sessionStorage.setItem('fcm-registry.serverKey', arguments[0])", key)
            driver.refresh()
            for size in [100, 1000, 2000]:
                renders, answers = [], []
                for _ in range(arguments.runs):
                    driver.execute_script("location.hash = '#/overview'")
                    WebDriverWait(driver, 30, ignored_exceptions=[StaleElementReferenceException]).until(lambda d: d.find_element(By.TAG_NAME, "h1").text.startswith("Project"))
                    driver.execute_script("document.querySelector('main').removeAttribute('data-render-ms')")
                    driver.execute_script("location.hash = '#/topics/big'")
                    select = WebDriverWait(driver, 30, ignored_exceptions=[StaleElementReferenceException]).until(EC.presence_of_element_located((By.ID, "page-size")))
                    WebDriverWait(driver, 30, ignored_exceptions=[StaleElementReferenceException]).until(lambda d: d.find_element(By.TAG_NAME, "main").get_attribute("data-render-ms"))
                    if size != 100:
                        driver.execute_script("document.querySelector('main').removeAttribute('data-render-ms')")
                        select.find_element(By.CSS_SELECTOR, f"option[value='{size}']").click()
                        WebDriverWait(driver, 30, ignored_exceptions=[StaleElementReferenceException]).until(lambda d: d.find_element(By.TAG_NAME, "main").get_attribute("data-render-ms"))
                    rows = len(driver.find_elements(By.CSS_SELECTOR, "tbody tr"))
                    assert rows == size, (rows, size)
                    renders.append(int(driver.find_element(By.TAG_NAME, "main").get_attribute("data-render-ms")))
                    answers.append(driver.execute_script("""
                        const pages = performance.getEntriesByType('resource').filter(e => e.name.includes('/api/topics/big'));
                        return pages[pages.length - 1].duration"""))
                print(f"first page of {size:>5} rows of a {arguments.tokens:,}-token topic: "
                      f"rendered {statistics.median(renders):.0f} ms after the answer (median of {arguments.runs}; "
                      f"min {min(renders)}, max {max(renders)}); the API answered in {statistics.median(answers):.0f} ms")
        finally:
            driver.quit()
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
