curl -N http://127.0.0.1:8080/v1/chat/completions \
  -H 'Content-Type: application/json' \
  -d '{"model": "demo", "messages": [{"role": "user", "content": "Hello"}], "stream": true}'
