-- wrk: POST /fcm/notification create, each request a new group of two new tokens.
-- Usage: KEY=<server key> wrk -t2 -c64 -d10s -s group-create.lua http://127.0.0.1:8080
local counter = 0
local thread_id = 0
local threads = {}

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  thread_id = id
  wrk.method = "POST"
  wrk.headers["Authorization"] = "key=" .. os.getenv("KEY")
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  counter = counter + 1
  local name = string.format("bench-%d-%d-%d", os.time(), thread_id, counter)
  local body = string.format(
    '{"operation":"create","notification_key_name":"%s","registration_ids":["%s-a:APA91bxxxxxxxxxxxxxxxxxxxx","%s-b:APA91bxxxxxxxxxxxxxxxxxxxx"]}',
    name, name, name)
  return wrk.format(nil, "/fcm/notification", nil, body)
end

function done(summary, latency, requests)
  io.write(string.format("non-2xx or errors: %d\n", summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
