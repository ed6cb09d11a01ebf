//! `seckill-local forward LISTEN=TARGET ...`: plain TCP forwarding, for
//! `sam local`. Its Lambda containers run in their own network namespaces
//! on Docker's bridge and reach the host at the bridge's gateway address,
//! while the local stack listens on loopback only. Forwarding the gateway
//! address's ports to loopback keeps the services off every other
//! interface.

use std::net::SocketAddr;
use tokio::net::{TcpListener, TcpStream};

/// One `LISTEN=TARGET` pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub listen: SocketAddr,
    pub target: SocketAddr,
}

impl Route {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (listen, target) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?}: expected LISTEN=TARGET, two ip:port addresses"))?;
        let addr = |part: &str| {
            part.parse::<SocketAddr>()
                .map_err(|e| format!("{text:?}: {part:?} is not an ip:port address ({e})"))
        };
        Ok(Self {
            listen: addr(listen)?,
            target: addr(target)?,
        })
    }
}

/// Binds every route (all or none), then forwards each connection until
/// the process is stopped.
pub async fn serve(routes: &[Route]) -> Result<(), String> {
    let mut listeners = Vec::with_capacity(routes.len());
    for route in routes {
        let listener = TcpListener::bind(route.listen)
            .await
            .map_err(|e| format!("listen on {}: {e}", route.listen))?;
        eprintln!("forwarding {} to {}", route.listen, route.target);
        listeners.push((listener, route.target));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (listener, target) in listeners {
        tasks.spawn(accept(listener, target));
    }
    while tasks.join_next().await.is_some() {}
    Ok(())
}

async fn accept(listener: TcpListener, target: SocketAddr) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            if let Ok(mut outbound) = TcpStream::connect(target).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn a_route_is_two_addresses_and_anything_else_says_what_is_wrong() {
        let route = Route::parse("172.17.0.1:6379=127.0.0.1:6379").unwrap();
        assert_eq!(route.listen, "172.17.0.1:6379".parse().unwrap());
        assert_eq!(route.target, "127.0.0.1:6379".parse().unwrap());
        for bad in ["127.0.0.1:1", "a=127.0.0.1:1", "127.0.0.1:1=host:2", ""] {
            let message = Route::parse(bad).unwrap_err();
            assert!(message.contains(&format!("{bad:?}")), "{message}");
        }
    }

    #[tokio::test]
    async fn bytes_go_both_ways_through_a_route() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = echo.accept().await.unwrap();
            let mut buf = [0u8; 5];
            socket.read_exact(&mut buf).await.unwrap();
            buf.reverse();
            socket.write_all(&buf).await.unwrap();
        });
        let free = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let listen = free.local_addr().unwrap();
        drop(free);
        tokio::spawn(async move { serve(&[Route { listen, target }]).await });
        let mut client = loop {
            if let Ok(client) = TcpStream::connect(listen).await {
                break client;
            }
            tokio::task::yield_now().await;
        };
        client.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"olleh");
    }
}
