-- wrk: POST /fcm/send to one registered token, each request a real (logged) send.
-- Usage: KEY=<server key> TOKEN=<token> wrk -t2 -c8 -d10s -s legacy-send.lua http://127.0.0.1:8080
function init(args)
  wrk.method = "POST"
  wrk.headers["Authorization"] = "key=" .. os.getenv("KEY")
  wrk.headers["Content-Type"] = "application/json"
  wrk.body = '{"to":"' .. os.getenv("TOKEN") .. '","data":{"score":"5x1"}}'
  wrk.path = "/fcm/send"
end
