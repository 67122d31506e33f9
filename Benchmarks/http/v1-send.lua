-- wrk: POST /v1/projects/{p}/messages:send to a topic, each request a real (logged) send.
-- Usage: KEY=<server key> PROJECT=<project id> wrk -t2 -c32 -d10s -s v1-send.lua http://127.0.0.1:8080
function init(args)
  wrk.method = "POST"
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("KEY")
  wrk.headers["Content-Type"] = "application/json"
  wrk.body = '{"message":{"topic":"bench","data":{"score":"5x1"}}}'
  wrk.path = "/v1/projects/" .. os.getenv("PROJECT") .. "/messages:send"
end
