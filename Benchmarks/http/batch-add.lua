-- wrk: POST /iid/v1:batchAdd of 1000 new tokens per request to one of the popular topics.
-- Usage: KEY=<server key> wrk -t1 -c4 -d20s -s batch-add.lua http://127.0.0.1:8080
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
  local prefix = string.format("nb%d-%d-%d", os.time(), thread_id, counter)
  local tokens = {}
  for i = 1, 1000 do
    tokens[i] = string.format('"%s-%d:APA91bQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ"', prefix, i)
  end
  local body = string.format('{"to":"/topics/topic-%d","registration_tokens":[%s]}', (counter % 5) + 1, table.concat(tokens, ","))
  return wrk.format(nil, "/iid/v1:batchAdd", nil, body)
end

function done(summary, latency, requests)
  io.write(string.format("non-2xx or errors: %d\n", summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
